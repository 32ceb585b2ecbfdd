package state

import (
	"context"
	"fmt"
)

// Probe opens a read view of applied state: the deep health check that
// state is readable now.
func (m *Machine) Probe(context.Context) (string, error) {
	view, err := m.ReadView()
	if err != nil {
		return "", fmt.Errorf("reading applied state: %w", err)
	}
	defer view.Close()
	return fmt.Sprintf("applied index %d readable", view.AppliedIndex()), nil
}
