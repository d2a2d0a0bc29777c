package htmlview

import (
	"math"
	"strconv"
	"strings"
)

// rgba is a colour with straight alpha, each part 0..1.
type rgba struct{ r, g, b, a float64 }

var (
	black = rgba{0, 0, 0, 1}
	white = rgba{1, 1, 1, 1}
)

// named are CSS's named colours (CSS Color 4).
var named = func() map[string]uint32 {
	m := map[string]uint32{}
	const list = "aliceblue f0f8ff antiquewhite faebd7 aqua 00ffff aquamarine 7fffd4 azure f0ffff beige f5f5dc bisque ffe4c4 " +
		"black 000000 blanchedalmond ffebcd blue 0000ff blueviolet 8a2be2 brown a52a2a burlywood deb887 cadetblue 5f9ea0 " +
		"chartreuse 7fff00 chocolate d2691e coral ff7f50 cornflowerblue 6495ed cornsilk fff8dc crimson dc143c cyan 00ffff " +
		"darkblue 00008b darkcyan 008b8b darkgoldenrod b8860b darkgray a9a9a9 darkgreen 006400 darkgrey a9a9a9 darkkhaki bdb76b " +
		"darkmagenta 8b008b darkolivegreen 556b2f darkorange ff8c00 darkorchid 9932cc darkred 8b0000 darksalmon e9967a " +
		"darkseagreen 8fbc8f darkslateblue 483d8b darkslategray 2f4f4f darkslategrey 2f4f4f darkturquoise 00ced1 " +
		"darkviolet 9400d3 deeppink ff1493 deepskyblue 00bfff dimgray 696969 dimgrey 696969 dodgerblue 1e90ff " +
		"firebrick b22222 floralwhite fffaf0 forestgreen 228b22 fuchsia ff00ff gainsboro dcdcdc ghostwhite f8f8ff gold ffd700 " +
		"goldenrod daa520 gray 808080 green 008000 greenyellow adff2f grey 808080 honeydew f0fff0 hotpink ff69b4 " +
		"indianred cd5c5c indigo 4b0082 ivory fffff0 khaki f0e68c lavender e6e6fa lavenderblush fff0f5 lawngreen 7cfc00 " +
		"lemonchiffon fffacd lightblue add8e6 lightcoral f08080 lightcyan e0ffff lightgoldenrodyellow fafad2 lightgray d3d3d3 " +
		"lightgreen 90ee90 lightgrey d3d3d3 lightpink ffb6c1 lightsalmon ffa07a lightseagreen 20b2aa lightskyblue 87cefa " +
		"lightslategray 778899 lightslategrey 778899 lightsteelblue b0c4de lightyellow ffffe0 lime 00ff00 limegreen 32cd32 " +
		"linen faf0e6 magenta ff00ff maroon 800000 mediumaquamarine 66cdaa mediumblue 0000cd mediumorchid ba55d3 " +
		"mediumpurple 9370db mediumseagreen 3cb371 mediumslateblue 7b68ee mediumspringgreen 00fa9a mediumturquoise 48d1cc " +
		"mediumvioletred c71585 midnightblue 191970 mintcream f5fffa mistyrose ffe4e1 moccasin ffe4b5 navajowhite ffdead " +
		"navy 000080 oldlace fdf5e6 olive 808000 olivedrab 6b8e23 orange ffa500 orangered ff4500 orchid da70d6 " +
		"palegoldenrod eee8aa palegreen 98fb98 paleturquoise afeeee palevioletred db7093 papayawhip ffefd5 peachpuff ffdab9 " +
		"peru cd853f pink ffc0cb plum dda0dd powderblue b0e0e6 purple 800080 rebeccapurple 663399 red ff0000 " +
		"rosybrown bc8f8f royalblue 4169e1 saddlebrown 8b4513 salmon fa8072 sandybrown f4a460 seagreen 2e8b57 " +
		"seashell fff5ee sienna a0522d silver c0c0c0 skyblue 87ceeb slateblue 6a5acd slategray 708090 slategrey 708090 " +
		"snow fffafa springgreen 00ff7f steelblue 4682b4 tan d2b48c teal 008080 thistle d8bfd8 tomato ff6347 " +
		"turquoise 40e0d0 violet ee82ee wheat f5deb3 white ffffff whitesmoke f5f5f5 yellow ffff00 yellowgreen 9acd32 " +
		"canvas ffffff window ffffff canvastext 000000 windowtext 000000 buttonface f0f0f0 field ffffff"
	f := strings.Fields(list)
	for i := 0; i+1 < len(f); i += 2 {
		v, _ := strconv.ParseUint(f[i+1], 16, 32)
		m[f[i]] = uint32(v)
	}
	return m
}()

// parseColor reads a CSS colour (names, #rgb[a], #rrggbb[aa], rgb[a](),
// hsl[a]()); ok is false for anything else, currentcolor included.
func parseColor(s string) (rgba, bool) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "transparent" {
		return rgba{}, true
	}
	if v, ok := named[s]; ok {
		return rgba{float64(v>>16&255) / 255, float64(v>>8&255) / 255, float64(v&255) / 255, 1}, true
	}
	if strings.HasPrefix(s, "#") {
		return hexColor(s[1:])
	}
	// Old HTML attributes take hex without "#".
	if c, ok := hexColor(s); ok && (len(s) == 6 || len(s) == 3) {
		return c, true
	}
	open := strings.IndexByte(s, '(')
	if open < 0 || !strings.HasSuffix(s, ")") {
		return rgba{}, false
	}
	fn := s[:open]
	parts := strings.FieldsFunc(s[open+1:len(s)-1], func(r rune) bool { return r == ',' || r == ' ' || r == '/' })
	if len(parts) < 3 {
		return rgba{}, false
	}
	num := func(p string, scale float64) (float64, bool) {
		if strings.HasSuffix(p, "%") {
			v, err := strconv.ParseFloat(strings.TrimSuffix(p, "%"), 64)
			return v / 100, err == nil
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSuffix(p, "deg"), "turn"), 64)
		return v / scale, err == nil
	}
	alpha := 1.0
	if len(parts) > 3 {
		a, ok := num(parts[3], 1)
		if !ok {
			return rgba{}, false
		}
		alpha = a
	}
	switch fn {
	case "rgb", "rgba":
		r, ok1 := num(parts[0], 255)
		g, ok2 := num(parts[1], 255)
		b, ok3 := num(parts[2], 255)
		if !ok1 || !ok2 || !ok3 {
			return rgba{}, false
		}
		return clampC(rgba{r, g, b, alpha}), true
	case "hsl", "hsla":
		h, ok1 := strconv.ParseFloat(strings.TrimSuffix(parts[0], "deg"), 64)
		sat, ok2 := num(parts[1], 100)
		l, ok3 := num(parts[2], 100)
		if ok1 != nil || !ok2 || !ok3 {
			return rgba{}, false
		}
		return clampC(hsl(h, sat, l, alpha)), true
	}
	return rgba{}, false
}

func hexColor(h string) (rgba, bool) {
	for _, c := range h {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return rgba{}, false
		}
	}
	x := func(s string) float64 {
		v, _ := strconv.ParseUint(s, 16, 8)
		if len(s) == 1 {
			v = v * 17
		}
		return float64(v) / 255
	}
	switch len(h) {
	case 3, 4:
		c := rgba{x(h[0:1]), x(h[1:2]), x(h[2:3]), 1}
		if len(h) == 4 {
			c.a = x(h[3:4])
		}
		return c, true
	case 6, 8:
		c := rgba{x(h[0:2]), x(h[2:4]), x(h[4:6]), 1}
		if len(h) == 8 {
			c.a = x(h[6:8])
		}
		return c, true
	}
	return rgba{}, false
}

func hsl(h, s, l, a float64) rgba {
	h = math.Mod(math.Mod(h, 360)+360, 360) / 360
	q := l * (1 + s)
	if l >= 0.5 {
		q = l + s - l*s
	}
	p := 2*l - q
	f := func(t float64) float64 {
		t = math.Mod(t+1, 1)
		switch {
		case t < 1.0/6:
			return p + (q-p)*6*t
		case t < 0.5:
			return q
		case t < 2.0/3:
			return p + (q-p)*(2.0/3-t)*6
		}
		return p
	}
	return rgba{f(h + 1.0/3), f(h), f(h - 1.0/3), a}
}

func clampC(c rgba) rgba {
	cl := func(v float64) float64 { return math.Max(0, math.Min(1, v)) }
	return rgba{cl(c.r), cl(c.g), cl(c.b), cl(c.a)}
}

// over paints c over an opaque backdrop.
func over(c, backdrop rgba) rgba {
	return rgba{c.r*c.a + backdrop.r*(1-c.a), c.g*c.a + backdrop.g*(1-c.a), c.b*c.a + backdrop.b*(1-c.a), 1}
}

// contrast is the WCAG contrast ratio of two opaque colours (1 to 21).
func contrast(a, b rgba) float64 {
	la, lb := luminance(a), luminance(b)
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

func luminance(c rgba) float64 {
	lin := func(v float64) float64 {
		if v <= 0.03928 {
			return v / 12.92
		}
		return math.Pow((v+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(c.r) + 0.7152*lin(c.g) + 0.0722*lin(c.b)
}
