package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// ErrNoDashboard is wrapped by DashboardURL's error when the daemon serves
// no dashboard (daemon.http is not set).
var ErrNoDashboard = errors.New("the daemon serves no dashboard")

// DashboardURL asks the daemon for a one-time login link to its dashboard,
// "http://ADDR/login?code=CODE", good once, for about a minute.
func (c *Client) DashboardURL() (string, error) {
	var out struct {
		URL string `json:"url"`
	}
	err := c.call(context.Background(), "POST", "/v1/dashboard/login", nil, nil, &out)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
		return "", fmt.Errorf(`%w: set [daemon] http = "127.0.0.1:7070" in its config and restart it`, ErrNoDashboard)
	}
	return out.URL, err
}
