package client

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// ErrNoDashboard is wrapped by DashboardLogin's error when the daemon
// serves no dashboard over TCP (daemon.http is not set).
var ErrNoDashboard = errors.New("the daemon serves no dashboard over TCP")

// DashboardLogin is a one-time login code for the dashboard. The code is
// a secret: it logs a browser in for 12 hours. It never goes in a URL; a
// browser POSTs it to LoginURL as the form field "code".
type DashboardLogin struct {
	URL       string    `json:"url"`       // the dashboard, "http://HOST:PORT/"
	LoginURL  string    `json:"login_url"` // its login form
	Code      string    `json:"code"`
	ID        string    `json:"id"` // names the code in DashboardLoginState; not a secret
	ExpiresAt time.Time `json:"-"`
}

// Login states of DashboardLoginState.
const (
	LoginPending = "pending"
	LoginUsed    = "used"
	LoginExpired = "expired"
)

// DashboardLogin asks the daemon for a one-time login code, good once,
// for about a minute.
func (c *Client) DashboardLogin() (DashboardLogin, error) {
	var out struct {
		DashboardLogin
		ExpiresAt program.Time `json:"expires_at"`
	}
	err := c.call(context.Background(), "POST", "/v1/dashboard/login", nil, nil, &out)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Status == 404 {
		return DashboardLogin{}, fmt.Errorf(`%w: set [daemon] http = "127.0.0.1:7070" in its config and restart it, `+
			`or reach the dashboard through the socket: ssh -L 7070:%s HOST, then open http://localhost:7070/`, ErrNoDashboard, c.socket)
	}
	out.DashboardLogin.ExpiresAt = out.ExpiresAt.Time
	return out.DashboardLogin, err
}

// DashboardLoginState says what became of the code with this id:
// LoginPending, LoginUsed or LoginExpired.
func (c *Client) DashboardLoginState(ctx context.Context, id string) (string, error) {
	var out struct {
		State string `json:"state"`
	}
	err := c.call(ctx, "GET", "/v1/dashboard/login/"+url.PathEscape(id), nil, nil, &out)
	return out.State, err
}
