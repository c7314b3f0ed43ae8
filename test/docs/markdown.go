package docs

import (
	"regexp"
	"strings"
)

// Span is one inline code span of a Markdown file.
type Span struct {
	// Line is the 1-based line the span starts on.
	Line int
	// Text is the span's content, its line breaks folded into spaces.
	Text string
	// Sentence is the sentence or table cell the span stands in, used to
	// tell a name an upstream program owns from one of ours.
	Sentence string
	// End is the offset in the document just after the closing backtick.
	End int
}

// codeSpan matches an inline code span; a blank line ends a paragraph, so a
// span never crosses one.
var codeSpan = regexp.MustCompile("`([^`\n]+(?:\n[^`\n]+)*)`")

// Spans returns the inline code spans of a Markdown document, outside its
// fenced code blocks.
func Spans(markdown string) []Span {
	text := blankFences(markdown)
	var spans []Span
	for _, m := range codeSpan.FindAllStringSubmatchIndex(text, -1) {
		spans = append(spans, Span{
			Line:     strings.Count(text[:m[0]], "\n") + 1,
			Text:     strings.Join(strings.Fields(text[m[2]:m[3]]), " "),
			Sentence: sentenceAround(text, m[0], m[1]),
			End:      m[1],
		})
	}
	return spans
}

// blankFences replaces the lines of fenced code blocks by empty lines, so
// line numbers stay and their content is not read as prose.
func blankFences(markdown string) string {
	lines := strings.Split(markdown, "\n")
	inFence := false
	for i, line := range lines {
		fence := strings.HasPrefix(strings.TrimSpace(line), "```")
		if inFence || fence {
			lines[i] = ""
		}
		if fence {
			inFence = !inFence
		}
	}
	return strings.Join(lines, "\n")
}

// sentenceAround returns the text around [start, end): the table cell when
// the span is in a table row, else the sentence of its paragraph or list
// item.
func sentenceAround(text string, start, end int) string {
	lineStart := strings.LastIndex(text[:start], "\n") + 1
	if strings.HasPrefix(strings.TrimSpace(text[lineStart:]), "|") {
		cellStart := strings.LastIndex(text[lineStart:start], "|") + lineStart + 1
		cellEnd := strings.Index(text[end:], "|")
		if lineEnd := strings.Index(text[end:], "\n"); cellEnd < 0 || (lineEnd >= 0 && lineEnd < cellEnd) {
			cellEnd = lineEnd
		}
		if cellEnd < 0 {
			cellEnd = len(text) - end
		}
		return text[cellStart : end+cellEnd]
	}
	from := lastBoundary(text[:start])
	to := end + nextBoundary(text[end:])
	return strings.Join(strings.Fields(text[from:to]), " ")
}

// sentenceEnd matches what ends a sentence or starts a new paragraph or
// list item.
var sentenceEnd = regexp.MustCompile(`\.\s|\n\s*\n|\n\s*(?:[-*]|\d+\.) |\n\s*\|`)

// lastBoundary is the offset in before where the sentence ending it starts.
func lastBoundary(before string) int {
	all := sentenceEnd.FindAllStringIndex(before, -1)
	if len(all) == 0 {
		return 0
	}
	return all[len(all)-1][1]
}

// nextBoundary is the offset in after where the sentence it continues ends.
func nextBoundary(after string) int {
	if loc := sentenceEnd.FindStringIndex(after); loc != nil {
		return loc[0]
	}
	return len(after)
}
