package teamscard

// The few Adaptive Card elements an approval card uses
// (https://adaptivecards.io/explorer/). Text that is not countersign's
// own constant words is always a TextRun inside a RichTextBlock: TextRun
// has no Markdown, so agent (or approver) text cannot format itself, hide
// a link behind a label, or pass for a heading. TextBlock, which Teams
// reads as Markdown, holds only countersign's own words and dates.

// Schema and Version of the cards: Action.Execute needs 1.4.
const (
	Schema  = "http://adaptivecards.io/schemas/adaptive-card.json"
	Version = "1.4"
)

// Card is an Adaptive Card.
type Card struct {
	Type    string    `json:"type"`
	Schema  string    `json:"$schema,omitempty"`
	Version string    `json:"version,omitempty"`
	Body    []Element `json:"body"`
	Actions []Action  `json:"actions,omitempty"`
	// MSTeams widens the card to the message column.
	MSTeams *MSTeams `json:"msteams,omitempty"`
}

// MSTeams holds Teams' own card properties.
type MSTeams struct {
	Width string `json:"width,omitempty"`
}

// Element is a body element: TextBlock, RichTextBlock, Container or
// Input.Text (only the properties in use).
type Element struct {
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	Wrap      bool   `json:"wrap,omitempty"`
	Weight    string `json:"weight,omitempty"`
	Size      string `json:"size,omitempty"`
	IsSubtle  bool   `json:"isSubtle,omitempty"`
	Color     string `json:"color,omitempty"`
	Spacing   string `json:"spacing,omitempty"`
	Separator bool   `json:"separator,omitempty"`
	// Container
	Style string    `json:"style,omitempty"`
	Items []Element `json:"items,omitempty"`
	// RichTextBlock
	Inlines []Inline `json:"inlines,omitempty"`
	// Input.Text
	ID           string `json:"id,omitempty"`
	Label        string `json:"label,omitempty"`
	Placeholder  string `json:"placeholder,omitempty"`
	IsMultiline  bool   `json:"isMultiline,omitempty"`
	IsRequired   bool   `json:"isRequired,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
	MaxLength    int    `json:"maxLength,omitempty"`
}

// Inline is a TextRun: plain text, never Markdown.
type Inline struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Weight   string `json:"weight,omitempty"`
	Size     string `json:"size,omitempty"`
	Color    string `json:"color,omitempty"`
	FontType string `json:"fontType,omitempty"`
	IsSubtle bool   `json:"isSubtle,omitempty"`
}

// Action is Action.Execute, Action.ShowCard or Action.OpenUrl.
type Action struct {
	Type  string `json:"type"`
	Title string `json:"title"`
	Style string `json:"style,omitempty"`
	// Action.Execute
	Verb string `json:"verb,omitempty"`
	Data *Data  `json:"data,omitempty"`
	// Action.ShowCard
	Card *Card `json:"card,omitempty"`
	// Action.OpenUrl
	URL string `json:"url,omitempty"`
}

// Run is a plain TextRun.
func Run(s string) Inline { return Inline{Type: "TextRun", Text: s} }

// Bold is a bold TextRun.
func Bold(s string) Inline { return Inline{Type: "TextRun", Text: s, Weight: "Bolder"} }

// Mono is a monospace TextRun.
func Mono(s string) Inline { return Inline{Type: "TextRun", Text: s, FontType: "Monospace"} }

// Rich is a RichTextBlock of runs.
func Rich(runs ...Inline) Element { return Element{Type: "RichTextBlock", Inlines: runs} }

// Own is a TextBlock of countersign's own words (Markdown: constants only).
func Own(s string) Element { return Element{Type: "TextBlock", Text: s, Wrap: true} }

// Subtle is small, subdued own words.
func Subtle(s string) Element {
	return Element{Type: "TextBlock", Text: s, Wrap: true, IsSubtle: true, Size: "Small"}
}

// Execute is an Action.Execute carrying data.
func Execute(verb, title, style string, d Data) Action {
	return Action{Type: "Action.Execute", Verb: verb, Title: title, Style: style, Data: &d}
}
