package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"github.com/tend-sh/tend/internal/program"
)

// Prompt queues text for the protocol instance id (POST
// /v1/programs/{id}/prompt) and returns its prompt_id.
func (c *Client) Prompt(id, text string) (string, error) {
	var out program.PromptAnswer
	err := c.call(context.Background(), "POST", "/v1/programs/"+url.PathEscape(id)+"/prompt", nil, map[string]string{"text": text}, &out)
	return out.PromptID, err
}

// PromptWait sends a prompt and follows its turn (?wait=1): started gets
// its prompt_id first, each piece of the answer goes to update as it
// comes, and the turn's stop reason is returned once it ends. ctx ending
// leaves the turn running (cancel it with Cancel).
func (c *Client) PromptWait(ctx context.Context, id, text string, started func(promptID string), update func(program.TurnUpdate)) (string, error) {
	b, _ := json.Marshal(map[string]string{"text": text})
	resp, err := c.do(ctx, "POST", "/v1/programs/"+url.PathEscape(id)+"/prompt", url.Values{"wait": {"1"}}, b)
	if err != nil {
		return "", err
	}
	defer resp.body.Close()
	sc := bufio.NewScanner(resp.body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	event := ""
	for sc.Scan() {
		line := sc.Bytes() // read in place: an update's data may be megabytes of text
		switch {
		case bytes.HasPrefix(line, []byte("event: ")):
			event = string(line[len("event: "):])
		case bytes.HasPrefix(line, []byte("data: ")):
			data := line[len("data: "):]
			switch event {
			case "prompt":
				var a program.PromptAnswer
				if json.Unmarshal(data, &a) == nil && started != nil {
					started(a.PromptID)
				}
			case "update":
				var u program.TurnUpdate
				if json.Unmarshal(data, &u) == nil && update != nil {
					update(u)
				}
			case "end":
				var u program.TurnUpdate
				if err := json.Unmarshal(data, &u); err != nil {
					return "", fmt.Errorf("reading the turn's end: %w", err)
				}
				return u.StopReason, nil
			}
		}
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("the daemon ended the answer before the turn ended")
}

// Cancel cancels the turn under way of the protocol instance id.
func (c *Client) Cancel(id string) error {
	return c.call(context.Background(), "POST", "/v1/programs/"+url.PathEscape(id)+"/cancel", nil, struct{}{}, nil)
}

// Answer answers the open permission request of the protocol instance id.
func (c *Client) Answer(id string, a program.PermissionAnswer) (program.PermissionAnswer, error) {
	var out program.PermissionAnswer
	err := c.call(context.Background(), "POST", "/v1/programs/"+url.PathEscape(id)+"/permission", nil, a, &out)
	return out, err
}
