// Package lifecycle runs the parts of a service under one lifecycle: they
// start in the order they are added, stop in the reverse order, and the
// first one to fail stops them all. A service's Run builds its parts one
// after the other, adding each to a Group as it goes (a resource once it
// is open, a task to run once everything is built), then calls Run; if
// building fails half way, Stop releases what was opened.
//
// The order is the dependency order: a part is added after what it uses,
// so it stops before what it uses stops. A task (an HTTP server, a
// follower of a stream) runs in its own goroutine with a context of its
// own, cancelled when its turn to stop comes; a resource (a database, a
// connection) is released by its stop function once every part added after
// it has stopped.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
)

// Group is the parts of one service. The zero value is ready to use. A
// Group belongs to the goroutine that builds and runs it; Add, Go, Run and
// Stop must not be called concurrently.
type Group struct {
	parts   []part
	stopped bool
}

// part is a resource (stop set) or a task (run set).
type part struct {
	name string
	stop func() error
	run  func(ctx context.Context) error

	cancel context.CancelFunc // a started task's
	done   chan struct{}      // closed when a started task returned
}

// Add adds a resource that is open already; stop releases it. A nil stop
// adds nothing.
func (g *Group) Add(name string, stop func() error) {
	if stop != nil {
		g.parts = append(g.parts, part{name: name, stop: stop})
	}
}

// Go adds a task that Run starts, in its turn, in a goroutine of its own.
// run returns once its context ends (a nil error) or when it fails; a
// failure stops the group. A task may also return nil early: it is done,
// and the group goes on.
func (g *Group) Go(name string, run func(ctx context.Context) error) {
	g.parts = append(g.parts, part{name: name, run: run})
}

// Loop adds a task that cannot fail: run returns once its context ends
// (or earlier, having nothing to do).
func (g *Group) Loop(name string, run func(ctx context.Context)) {
	g.Go(name, func(ctx context.Context) error {
		run(ctx)
		return nil
	})
}

// Run starts the tasks in order and runs until ctx ends or a task fails.
// Then it stops every part in reverse order: it cancels each task and waits
// for it to return, and releases each resource. It returns the first task's
// failure joined with the errors of the releases; nil after a clean stop.
// Run may be called once.
func (g *Group) Run(ctx context.Context) error {
	if g.stopped {
		return errors.New("lifecycle: the group has stopped")
	}
	// Each task's context leaves out ctx's cancellation (not its values),
	// so that the tasks stop one by one, in reverse, rather than all at
	// once when ctx ends.
	base := context.WithoutCancel(ctx)
	failed := make(chan error, len(g.parts))
	for i := range g.parts {
		p := &g.parts[i]
		if p.run == nil {
			continue
		}
		var taskCtx context.Context
		taskCtx, p.cancel = context.WithCancel(base)
		p.done = make(chan struct{})
		go func() {
			defer close(p.done)
			if err := p.run(taskCtx); err != nil {
				failed <- fmt.Errorf("%s: %w", p.name, err)
			}
		}()
	}
	var first error
	select {
	case <-ctx.Done():
	case first = <-failed:
	}
	return errors.Join(first, g.stop())
}

// Stop releases every resource in reverse order; it is for a service whose
// building failed before Run. Run stops the group itself: after Run, Stop
// does nothing.
func (g *Group) Stop() error { return g.stop() }

func (g *Group) stop() error {
	if g.stopped {
		return nil
	}
	g.stopped = true
	var errs []error
	for i := len(g.parts) - 1; i >= 0; i-- {
		p := &g.parts[i]
		switch {
		case p.stop != nil:
			if err := p.stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping %s: %w", p.name, err))
			}
		case p.done != nil:
			p.cancel()
			<-p.done
		}
	}
	return errors.Join(errs...)
}
