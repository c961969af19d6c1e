package cli

import (
	"context"
	"errors"
	"fmt"
	"html"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tend-sh/tend/internal/client"
)

func (e *env) dashboardCmd() *cobra.Command {
	var open bool
	cmd := &cobra.Command{
		Use:   "dashboard [--open]",
		Short: "print the web dashboard's address and a one-time login code",
		Long: "Print the address of the dashboard the daemon serves on [daemon] http and a one-time code to\n" +
			"enter on its login page. The code works once, within a minute; it logs the browser in for\n" +
			"12 hours. With --open, open a browser that logs in by itself: tend hands xdg-open a private\n" +
			"page that posts the code (the code is never in a URL or a command line, where other users\n" +
			"could read it) and removes the page once the code is used or expired.",
		Args: cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			login, err := c.DashboardLogin()
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "Dashboard:  %s\nLogin code: %s (works once, until %s)\n",
				login.URL, login.Code, login.ExpiresAt.Local().Format("15:04:05"))
			if !open {
				fmt.Fprintln(e.stdout, "Open the dashboard and enter the code on its login page.")
				return nil
			}
			return e.openDashboard(c, login)
		}),
	}
	cmd.Flags().BoolVar(&open, "open", false, "open a browser that logs in by itself (with xdg-open)")
	return cmd
}

// openDashboard logs a browser in: it writes a page that POSTs the code
// into a new private directory, hands xdg-open that file's path, and
// removes both once the code is used or expired (or on Ctrl-C).
func (e *env) openDashboard(c *client.Client, login client.DashboardLogin) error {
	xdg, err := exec.LookPath("xdg-open")
	if err != nil {
		fmt.Fprintln(e.stderr, "tend: xdg-open not found; open the dashboard and enter the code above")
		return nil
	}
	dir, err := os.MkdirTemp(privateTemp(), "tend-login-") // mode 0700
	if err != nil {
		return fmt.Errorf("writing the login page: %w", err)
	}
	defer os.RemoveAll(dir)
	page := filepath.Join(dir, "login.html")
	if err := writeLoginPage(page, login); err != nil {
		return err
	}
	// Not waited for to the end: xdg-open may run as long as the browser
	// it started. Its output would go nowhere useful.
	xo := exec.Command(xdg, page)
	if err := xo.Start(); err != nil {
		fmt.Fprintf(e.stderr, "tend: xdg-open: %v; open the dashboard and enter the code above\n", err)
		return nil
	}
	exited := make(chan error, 1)
	go func() { exited <- xo.Wait() }()
	fmt.Fprintln(e.stdout, "Opening it in a browser, which logs in by itself...")

	ctx, stop := signal.NotifyContext(e.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return awaitLogin(ctx, c, login, exited, e)
}

// loginPoll is how often tend dashboard --open asks whether the code was used.
const loginPoll = 200 * time.Millisecond

// awaitLogin waits until the browser has used the code, the code expired,
// xdg-open failed or ctx ended.
func awaitLogin(ctx context.Context, c *client.Client, login client.DashboardLogin, exited <-chan error, e *env) error {
	bound := time.Until(login.ExpiresAt) + time.Second
	if bound <= 0 || bound > 2*time.Minute { // another clock; the daemon says "expired" anyway
		bound = time.Minute
	}
	expiry := time.NewTimer(bound)
	defer expiry.Stop()
	tick := time.NewTicker(loginPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-exited:
			exited = nil
			if err != nil {
				fmt.Fprintf(e.stderr, "tend: xdg-open: %v; open the dashboard and enter the code above\n", err)
				return nil
			}
		case <-expiry.C:
			return errors.New("the browser did not log in before the code expired; run tend dashboard again")
		case <-tick.C:
			state, err := c.DashboardLoginState(ctx, login.ID)
			switch {
			case err != nil:
				return err
			case state == client.LoginUsed:
				fmt.Fprintln(e.stdout, "Logged in.")
				return nil
			case state == client.LoginExpired:
				return errors.New("the browser did not log in before the code expired; run tend dashboard again")
			}
		}
	}
}

// privateTemp is where the login page goes: the user's runtime directory
// (private, in memory) if there is one, else the temporary directory.
func privateTemp() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			return d
		}
	}
	return os.TempDir()
}

// loginPage POSTs the code to the login form as soon as it loads (or when
// its button is pressed, without JavaScript).
const loginPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">
<title>Logging in to tend</title></head>
<body><form id="login" method="post" action="%[1]s">
<input type="hidden" name="code" value="%[2]s">
<p>Logging in to the tend dashboard at %[3]s ... <button type="submit">Log in</button></p>
</form>
<script>document.getElementById('login').submit()</script>
</body></html>
`

// writeLoginPage writes the login page at path, mode 0600; path must not
// exist yet.
func writeLoginPage(path string, login client.DashboardLogin) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("writing the login page: %w", err)
	}
	_, err = fmt.Fprintf(f, loginPage, html.EscapeString(login.LoginURL), html.EscapeString(login.Code), html.EscapeString(login.URL))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing the login page: %w", err)
	}
	return nil
}
