package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// listFlag collects a repeatable flag whose values may also be
// comma-separated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// watchLine is the --json form of one stream message.
type watchLine struct {
	ID    string          `json:"id,omitempty"`
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

// watch follows GET /v1/events/stream and prints one line per message. On
// a disconnect it connects to the next validator of --validator (a
// comma-separated list) with Last-Event-ID set to the last event id
// printed, after a pause that grows while attempts fail.
func watch(ctx context.Context, args []string, out, notices io.Writer) error {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	var c commonFlags
	c.register(fs)
	var wallets, orgs listFlag
	fs.Var(&wallets, "wallet", "only events of this wallet (repeat, or comma-separate, for several)")
	fs.Var(&orgs, "org", "only events of these organizations of the --wallet wallets")
	path := fs.String("path", "", "only events under this path")
	from := fs.String("last-event-id", "", "resume after this event id (default: new events only)")
	count := fs.Int("count", 0, "stop after this many events (0: follow until interrupted)")
	backoff := fs.Duration("backoff", 500*time.Millisecond, "first pause before reconnecting, when the stream suggests none")
	maxBackoff := fs.Duration("max-backoff", 30*time.Second, "longest pause between reconnection attempts")
	idle := fs.Duration("idle-timeout", 60*time.Second, "reconnect when nothing, not even a keep-alive, arrives for this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if len(orgs) > 0 && len(wallets) == 0 {
		return errors.New("--org only applies together with --wallet")
	}
	var urls listFlag
	_ = urls.Set(c.validator)
	if len(urls) == 0 {
		return errors.New("give at least one validator URL with --validator")
	}
	w := &ledgerclient.EventWatch{
		URLs: urls, Token: c.token, LastEventID: *from,
		Filter:     ledgerclient.EventFilter{Wallets: wallets, Organizations: orgs, Path: *path},
		MinBackoff: *backoff, MaxBackoff: *maxBackoff, IdleTimeout: *idle,
		Notify: func(n ledgerclient.WatchNotice) {
			resume := "new events"
			if n.LastEventID != "" {
				resume = "after event " + n.LastEventID
			}
			if n.Connected {
				fmt.Fprintf(notices, "connected to %s, from %s\n", n.URL, resume)
				return
			}
			fmt.Fprintf(notices, "%s: %v; reconnecting in %s, from %s\n", n.URL, n.Err, n.Wait.Round(time.Millisecond), resume)
		},
	}
	events := 0
	return w.Run(ctx, func(m ledgerclient.StreamMessage) error {
		if err := printMessage(out, m, c.json); err != nil {
			return err
		}
		if m.HasID {
			events++
		}
		if *count > 0 && events >= *count {
			return ledgerclient.ErrStopWatch
		}
		return nil
	})
}

// printMessage writes one line: the event's id, type, action, wallet,
// organization and path (and CID), or a control message's name and data;
// with asJSON the message as JSON.
func printMessage(out io.Writer, m ledgerclient.StreamMessage, asJSON bool) error {
	if asJSON {
		line := watchLine{Event: m.Event, Data: m.Data}
		if m.HasID {
			line.ID = m.ID
		}
		if !json.Valid(m.Data) {
			line.Data, _ = json.Marshal(string(m.Data))
		}
		b, err := json.Marshal(line)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	var ev api.Event
	if !m.HasID || json.Unmarshal(m.Data, &ev) != nil {
		_, err := fmt.Fprintf(out, "%s %s\n", m.Event, oneLine(m.Data))
		return err
	}
	line := fmt.Sprintf("%s %s %s %s %s %s", m.ID, m.Event, orDash(ev.Action), orDash(ev.Wallet), orDash(ev.Organization), orDash(ev.Path))
	if ev.CasCID != "" {
		line += " cid=" + ev.CasCID
	}
	_, err := fmt.Fprintln(out, line)
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps data that spans several lines on one.
func oneLine(b []byte) string { return strings.ReplaceAll(string(b), "\n", `\n`) }
