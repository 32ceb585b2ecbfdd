package consensus

import (
	"context"
	"errors"
	"fmt"
)

// Probe reports raft's view now: the deep health check fails while no
// leader is known.
func (n *Node) Probe(context.Context) (string, error) {
	st := n.Status()
	detail := fmt.Sprintf("role %s, term %d, leader %d, commit %d, applied %d", st.Role, st.Term, st.Leader, st.CommitIndex, st.AppliedIndex)
	if st.Leader == 0 {
		return "", errors.New("no leader known: " + detail)
	}
	return detail, nil
}
