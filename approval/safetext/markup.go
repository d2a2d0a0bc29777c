package safetext

import (
	"regexp"
	"strings"
)

// slackMarkup matches what Slack's mrkdwn turns into something other than
// its characters: <!here>, <!channel>, <!everyone>, <!subteam^…>,
// <!date^…|label>, <@U…> and <#C…> references, and labelled links
// <https://x|label> (whose label hides where they go).
var slackMarkup = regexp.MustCompile(`<(?:[!@#][^<>\n]*|[A-Za-z][A-Za-z0-9+.-]*:[^<>|\n]*\|[^<>\n]*)>`)

// SlackMarkup lists the distinct pieces of s that Slack would read as a
// mention, a broadcast, a date or a labelled link, in order, each cut to
// 120 characters. Whoever posts s in Slack (slack.post_message) notifies
// or links through them; countersign's own messages show them as text.
func SlackMarkup(s string) []string {
	if !strings.Contains(s, "<") {
		return nil
	}
	var out []string
	for _, m := range slackMarkup.FindAllString(s, 20) {
		if r := []rune(m); len(r) > 120 {
			m = string(r[:119]) + "…"
		}
		if !contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
