package server

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// consoleFilters drives the memories page's filter box (the console
// browser test calls it on the active memories of owner): a filter with a
// range lists exactly what it keeps, a filter the API refuses shows the
// 422 message naming the part, text that is not JSON is refused before
// any request, and an emptied box lists everything again. It leaves the
// box empty and the state filter on Active.
func consoleFilters(t *testing.T, b *browser, srv *testServer, owner string) {
	t.Helper()
	srv.do(t, req{method: "POST", path: memPath(owner, "memories"), body: map[string]any{"content": "Alice booked a hotel in Porto for 120 euros",
		"category": "contextual", "metadata": map[string]any{"price": 120}, "tags": []string{"travel"}}}).want(t, 201)
	srv.do(t, req{method: "POST", path: memPath(owner, "memories"), body: map[string]any{"content": "Alice booked a hostel in Braga for 25 euros",
		"category": "contextual", "metadata": map[string]any{"price": 25}, "tags": []string{"travel"}}}).want(t, 201)
	box := chromedp.CSS(`#filters textarea[name="filter"]`)
	apply := chromedp.Click(chromedp.CSS(`#filters button[type="submit"]`))
	rows := `[...document.querySelectorAll('#memories tbody tr')].map(r => r.textContent)`

	b.do("filter with a range",
		chromedp.SetValue(chromedp.CSS(`#filters select[name="state"]`), "active"),
		chromedp.SetValue(box, `{"and": [{"tags": {"eq": "travel"}}, {"metadata": {"key": "price", "lt": 100}}]}`), apply)
	b.until("the range filter applies", `(r => r.length === 1 && r[0].includes('Braga'))(`+rows+`)`)
	b.screenshot("memories-filter")

	b.do("a filter the API refuses", chromedp.SetValue(box, `{"metadata": {"key": "price", "gt": "cheap"}}`), apply)
	b.until("the 422 is shown", `!!document.querySelector('#memories .error')`)
	if msg := b.text("#memories .error"); !strings.Contains(msg, "422") || !strings.Contains(msg, "filter.metadata.gt") || !strings.Contains(msg, "RFC 3339") {
		t.Fatalf("a refused filter shows %q, want the 422 naming filter.metadata.gt", msg)
	}

	b.do("a filter that is not JSON", chromedp.SetValue(box, `{"tags": `), apply)
	b.until("the JSON error is shown", `(document.querySelector('#memories .error')||{textContent: ''}).textContent.includes('not JSON')`)

	// SetValue refuses an empty value: clear the box in the page.
	b.do("clear the filter", chromedp.Evaluate[chromedp.Void](`document.querySelector('#filters textarea[name="filter"]').value = ''`), apply)
	b.until("every active memory is listed again", `(r => r.some(t => t.includes('Porto for 120')) && r.some(t => t.includes('medium roast')))(`+rows+`)`)
}
