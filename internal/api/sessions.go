package api

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/tend-sh/tend/internal/human"
	"github.com/tend-sh/tend/internal/program"
)

// Sessions: agents started on demand. A platform labels the programs it
// adds (labels), has them removed once they end (remove_on_exit), and
// selects by label (?label=KEY=VALUE, repeatable, all must match) when it
// lists, acts, reads logs and events, or removes.

// labelParam reads ?label=KEY=VALUE (repeatable); a malformed one is a 400
// naming it.
func labelParam(r *http.Request) (program.LabelSelector, error) {
	list, ok := r.URL.Query()["label"]
	if !ok {
		return nil, nil
	}
	sel, err := program.ParseLabelSelector(list)
	if err != nil {
		return nil, badRequest(err.Error())
	}
	return sel, nil
}

// columnsParam reads the table view's ?show_labels=1.
func columnsParam(r *http.Request) (human.TableOptions, error) {
	var o human.TableOptions
	var err error
	o.Labels, err = boolParam(r, "show_labels")
	return o, err
}

// removedBody answers a removal by label: the names removed, maybe none.
type removedBody struct {
	Removed []string `json:"removed"`
}

// removeAll answers DELETE /v1/programs?label=KEY=VALUE...: every program
// with those labels is stopped and forgotten. Without a label it is
// refused: one request must not empty the fleet by accident.
func (s *Server) removeAll(w http.ResponseWriter, r *http.Request) error {
	labels, err := labelParam(r)
	if err != nil {
		return err
	}
	if len(labels) == 0 {
		return badRequest("DELETE /v1/programs removes by label: add ?label=KEY=VALUE (DELETE /v1/programs/NAME removes one program)")
	}
	return s.removeMatching(w, r, "", labels)
}

func (s *Server) removeMatching(w http.ResponseWriter, r *http.Request, name string, labels program.LabelSelector) error {
	names, err := s.b.RemoveMatching(r.Context(), name, labels, removeOptions(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, removedBody{Removed: nonNil(names)})
	return nil
}

// signal answers POST /v1/programs/{id}/signal with body {"signal": "INT"}
// (a name with or without SIG, or a number): sent to the process group of
// each running instance the id names (narrowed by ?label=). It is how an
// attached client passes its Ctrl-C on, as docker run does; 409 when none
// is running.
func (s *Server) signal(w http.ResponseWriter, r *http.Request) error {
	sel, err := selectorParam(r.PathValue("id"))
	if err != nil {
		return err
	}
	var body struct {
		Signal json.RawMessage `json:"signal"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || len(body.Signal) == 0 {
		return badRequest(`body must be {"signal": "INT"} (a signal name or number)`)
	}
	var name string
	if json.Unmarshal(body.Signal, &name) != nil {
		name = string(body.Signal) // a number
	}
	sig, ok := program.ParseSignal(name)
	if !ok {
		return badRequest(fmt.Sprintf("signal %s: want a name like \"INT\" or a number from 1 to 64", body.Signal))
	}
	labels, err := labelParam(r)
	if err != nil {
		return err
	}
	if len(labels) > 0 {
		sts, err := s.b.Status(sel, labels)
		if err != nil {
			return err
		}
		var ids []string
		for _, st := range sts {
			if got, err := s.b.Signal(st.ID, sig); err == nil {
				ids = append(ids, got...)
			}
		}
		if len(ids) == 0 {
			return fmt.Errorf("%w: no running instance of %s matches %s", program.ErrNotRunning, sel, labels)
		}
		writeJSON(w, http.StatusOK, idsBody{IDs: ids})
		return nil
	}
	ids, err := s.b.Signal(sel, sig)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, idsBody{IDs: nonNil(ids)})
	return nil
}

// namesItself reports whether a POST /v1/programs body has a "name" that
// is not null (a body that is no JSON object is for the parser to judge).
func namesItself(body []byte) bool {
	var p struct {
		Name json.RawMessage `json:"name"`
	}
	if json.Unmarshal(body, &p) != nil {
		return true
	}
	return len(p.Name) > 0 && string(p.Name) != "null"
}

// withName returns the object body with "name": name added last, where it
// wins over a "name": null before it. The result is what is kept, so the
// program comes back under its name after a daemon restart.
func withName(body []byte, name string) []byte {
	b := bytes.TrimRight(body, " \t\r\n")
	if len(b) < 2 || b[len(b)-1] != '}' {
		return body // not an object: the parser says so
	}
	field, _ := json.Marshal(name)
	inner := bytes.TrimSpace(b[1 : len(b)-1])
	out := make([]byte, 0, len(b)+len(field)+10)
	if len(inner) == 0 {
		out = append(out, `{"name":`...)
	} else {
		out = append(append(out, b[:len(b)-1]...), `,"name":`...)
	}
	return append(append(out, field...), '}')
}

// newRunName is a fresh generated program name: run- and 8 hex digits.
func newRunName() string {
	var b [4]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather than return an error)
	return "run-" + hex.EncodeToString(b[:])
}
