package api

import (
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
)

// Membership routes (internal layer). Changes are made on the leader; a
// follower forwards them. See docs/runbooks/membership.md.

func (s *Server) listMembers(c echo.Context) error {
	voters, learners := s.deps.Cluster.Membership()
	return c.JSON(http.StatusOK, map[string]any{
		"contractVersion": api.ClusterStateVersion, "members": s.deps.Cluster.Members(), "voters": voters, "learners": learners,
	})
}

func (s *Server) addMember(c echo.Context) error {
	if handled, err := s.forward(c); handled {
		return err
	}
	var m api.Member
	if err := c.Bind(&m); err != nil {
		return apierror.New(apierror.InvalidField, "body must be JSON {id, peerAddr, apiUrl}")
	}
	switch {
	case m.ID == 0:
		return apierror.Field("id", "must be a positive integer, never used before in this cluster")
	case !validHostPort(m.PeerAddr):
		return apierror.Field("peerAddr", "must be host:port")
	case !validURL(m.APIURL):
		return apierror.Field("apiUrl", "must be http(s)://host:port")
	}
	voters, learners := s.deps.Cluster.Membership()
	for _, id := range append(voters, learners...) {
		if id == m.ID {
			return apierror.New(apierror.ProposalIDConflict, "validator %d is already a member", m.ID).WithDetail("field", "id")
		}
	}
	if err := s.deps.Cluster.AddMember(c.Request().Context(), m); err != nil {
		return err
	}
	return s.listMembers(c)
}

func (s *Server) removeMember(c echo.Context) error {
	if handled, err := s.forward(c); handled {
		return err
	}
	id, err := strconv.ParseUint(c.Param("id"), 10, 64)
	if err != nil || id == 0 {
		return apierror.Field("id", "must be a positive integer")
	}
	voters, learners := s.deps.Cluster.Membership()
	member := false
	for _, v := range append(voters, learners...) {
		member = member || v == id
	}
	if !member {
		return apierror.New(apierror.NotFound, "validator %d is not a member", id)
	}
	if len(voters) == 1 && voters[0] == id {
		return apierror.New(apierror.Forbidden, "validator %d is the last voter; a cluster cannot remove it", id)
	}
	if err := s.deps.Cluster.RemoveMember(c.Request().Context(), id); err != nil {
		return err
	}
	return s.listMembers(c)
}

func validHostPort(s string) bool {
	_, _, err := net.SplitHostPort(s)
	return err == nil
}

func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
