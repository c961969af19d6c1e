package events_test

import (
	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/events"
)

// apiEvents is how the daemon serves a Log as api.Events: Subscribe returns
// the concrete type so this package need not import api.
type apiEvents struct{ *events.Log }

func (a apiEvents) Subscribe(since uint64) api.Subscription { return a.Log.Subscribe(since) }

var (
	_ api.Events       = apiEvents{}
	_ api.Subscription = (*events.Subscription)(nil)
)
