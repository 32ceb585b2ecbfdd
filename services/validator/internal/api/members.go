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
// follower forwards them. The leader decides by the membership rules (ADR
// 0027): a new member joins as a learner, at most one change at a time, no
// reused id, and never a configuration without a reachable quorum. See
// docs/runbooks/membership.md.

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
	if err := s.deps.Cluster.AddMember(c.Request().Context(), m); err != nil {
		return err
	}
	return s.listMembers(c)
}

func (s *Server) removeMember(c echo.Context) error {
	if handled, err := s.forward(c); handled {
		return err
	}
	id, err := memberID(c)
	if err != nil {
		return err
	}
	if err := s.deps.Cluster.RemoveMember(c.Request().Context(), id); err != nil {
		return err
	}
	return s.listMembers(c)
}

// promoteMember makes a caught-up learner a voter. It reads no body: the
// id in the path is its only argument.
func (s *Server) promoteMember(c echo.Context) error {
	if handled, err := s.forward(c); handled {
		return err
	}
	id, err := memberID(c)
	if err != nil {
		return err
	}
	if err := s.deps.Cluster.PromoteMember(c.Request().Context(), id); err != nil {
		return err
	}
	return s.listMembers(c)
}

func memberID(c echo.Context) (uint64, error) {
	id, err := strconv.ParseUint(c.Param("id"), 10, 64)
	if err != nil || id == 0 {
		return 0, apierror.Field("id", "must be a positive integer")
	}
	return id, nil
}

func validHostPort(s string) bool {
	_, _, err := net.SplitHostPort(s)
	return err == nil
}

func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
