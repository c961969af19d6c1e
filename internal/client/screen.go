package client

import (
	"context"
	"net/url"
	"strconv"

	"github.com/tend-sh/tend/internal/program"
)

// ScreenHistory is Screen with up to history lines of the history above
// the screen (GET /v1/screen/{id}?history=N; docs/terminal.md).
func (c *Client) ScreenHistory(id string, ansi bool, history int) (program.Screen, error) {
	var out program.Screen
	return out, c.call(context.Background(), "GET", "/v1/screen/"+url.PathEscape(id), historyQuery(ansi, history), nil, &out)
}

// ScreenHistoryJSON returns ScreenHistory's answer undecoded.
func (c *Client) ScreenHistoryJSON(id string, ansi bool, history int) ([]byte, error) {
	return c.raw("/v1/screen/"+url.PathEscape(id), historyQuery(ansi, history))
}

func historyQuery(ansi bool, history int) url.Values {
	q := url.Values{"history": {strconv.Itoa(history)}}
	if ansi {
		q.Set("ansi", "1")
	}
	return q
}

// ScreenText returns what tend screen prints, rendered by the daemon
// (GET /v1/screen/{id}?view=text): up to history lines of history, then
// the screen, a row a line, escaped (with ansi, SGR colours kept).
func (c *Client) ScreenText(id string, ansi bool, history int) ([]byte, error) {
	q := historyQuery(ansi, history)
	q.Set("view", "text")
	return c.raw("/v1/screen/"+url.PathEscape(id), q)
}
