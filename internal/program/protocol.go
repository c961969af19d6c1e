package program

import "errors"

// The protocol agents' part of the vocabulary (docs/protocol.md): the
// permission request an instance waits on, the turn and permission events,
// and the pieces of a streamed answer.

// Event kinds of protocol agents.
const (
	KindTurn       = "turn"
	KindPermission = "permission"
)

// Phases of turn and permission events.
const (
	PhaseTurnStarted = "started"
	PhaseTurnEnded   = "ended"
	PhaseAsked       = "asked"
	PhaseAnswered    = "answered"
)

// Who answered a permission request.
const (
	ByOperator  = "operator"
	ByPolicy    = "policy"
	ByCancelled = "cancelled"
)

// Stop reasons tend itself gives a turn, besides the agent's own (end_turn,
// max_tokens, max_turn_requests, refusal, cancelled).
const (
	StopEndTurn   = "end_turn"
	StopCancelled = "cancelled"
	// StopRunEnded: the run ended (or the daemon lost the connection)
	// before the agent answered the prompt.
	StopRunEnded = "run_ended"
	// StopRefused: the agent answered the prompt with an error.
	StopRefused = "error"
)

// PermissionOption is one answer an agent offers to a permission request.
type PermissionOption struct {
	OptionID string `json:"option_id"`
	Name     string `json:"name"`
	Kind     string `json:"kind"` // allow_once | allow_always | reject_once | reject_always
}

// Waiting is the permission request an instance waits on: the status's
// "waiting" object.
type Waiting struct {
	RequestID string             `json:"request_id"`
	Title     string             `json:"title"`
	ToolKind  string             `json:"tool_kind"`
	Options   []PermissionOption `json:"options"`
	Since     Time               `json:"since"`
}

// Turn is the payload of a turn event.
type Turn struct {
	Phase      string `json:"phase"`
	PromptID   string `json:"prompt_id"`
	StopReason string `json:"stop_reason,omitempty"`
	DurationMS *int64 `json:"duration_ms,omitempty"`
}

// Permission is the payload of a permission event.
type Permission struct {
	Phase     string             `json:"phase"`
	RequestID string             `json:"request_id"`
	Title     string             `json:"title,omitempty"`
	ToolKind  string             `json:"tool_kind,omitempty"`
	Options   []PermissionOption `json:"options,omitempty"`
	OptionID  string             `json:"option_id,omitempty"`
	By        string             `json:"by,omitempty"`
}

// Kinds of the pieces of a streamed answer (TurnUpdate.Type).
const (
	UpdateText       = "text"       // message text as it came
	UpdateTool       = "tool"       // one line: [tool] TITLE (KIND) STATUS
	UpdatePlan       = "plan"       // one line per entry: [plan] …
	UpdatePermission = "permission" // one line: [permission] …
	UpdateEnd        = "end"        // the turn ended with StopReason
)

// TurnUpdate is one piece of a prompt's streamed answer, as `tend prompt`
// and POST /v1/programs/{id}/prompt?wait=1 hand it on.
type TurnUpdate struct {
	Type       string `json:"type"`
	PromptID   string `json:"prompt_id,omitempty"`
	Text       string `json:"text,omitempty"`
	StopReason string `json:"stop_reason,omitempty"`
}

// PromptAnswer is what POST /v1/programs/{id}/prompt answers without wait.
type PromptAnswer struct {
	ID       string `json:"id"`
	PromptID string `json:"prompt_id"`
}

// Errors of the protocol verbs (prompt, cancel, approve, deny), mapped in
// one place by the API (409, 400, 429) and by the CLI to exit statuses.
var (
	// ErrNotProtocol: the instance does not speak a protocol. The
	// message names it: `worker:0 does not speak a protocol (protocol = "")`.
	ErrNotProtocol = errors.New(`does not speak a protocol (protocol = "")`)
	// ErrQueueFull: QueueMax prompts already wait (429).
	ErrQueueFull = errors.New("16 prompts are already waiting for this agent")
	// ErrNothingOpen: no permission request is open (409).
	ErrNothingOpen = errors.New("no permission request is open")
	// ErrUnknownOption: the open request has no such option (400); it
	// stays open.
	ErrUnknownOption = errors.New("no such option")
	// ErrNoTurn: cancel with no turn under way (409).
	ErrNoTurn = errors.New("no turn is under way")
)

// PermissionAnswer is the body of POST /v1/programs/{id}/permission, and
// its answer (with the request's id and the option picked).
type PermissionAnswer struct {
	RequestID string `json:"request_id"`
	OptionID  string `json:"option_id,omitempty"`
	Cancel    bool   `json:"cancel,omitempty"`
}
