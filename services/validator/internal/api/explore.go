package api

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
)

// explore is the point read of one node by path (GET /api/explore?path=).
// A path with content below it but no node of its own (a wallet's root, an
// organization) answers as a virtual folder, so the tree can be walked from
// the top.
func (s *Server) explore(c echo.Context) error {
	path := c.QueryParam("path")
	if !strings.HasPrefix(path, "/") || strings.Contains(path, "//") || len(path) > 4096 {
		return apierror.Field("path", "must be an absolute content path")
	}
	if path != "/" {
		path = strings.TrimSuffix(path, "/")
	}
	node, ok, err := s.deps.Content.Node(path)
	if err != nil {
		return err
	}
	children, err := s.deps.Content.Children(path, s.cfg.MaxChildren)
	if err != nil {
		return err
	}
	switch {
	case ok:
		return c.JSON(http.StatusOK, api.NodeFromRecord(node, children))
	case len(children) > 0:
		return c.JSON(http.StatusOK, api.VirtualNode(path, children))
	}
	return apierror.New(apierror.NotFound, "no node at %s", path)
}
