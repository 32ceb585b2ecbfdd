package api

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/labstack/echo/v4"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/apierror"
	"github.com/contentledger/contentledger/pkg/httpserver"
	"github.com/contentledger/contentledger/pkg/signing"
	"github.com/contentledger/contentledger/services/validator/internal/headreport"
)

// The registration and compatibility routes (docs/adr/0038):
// /v1/register-client, /v1/head, /v1/follower/head-update, /v1/ngrok-url.

// Clients binds client ids to wallets through raft (pipeline.Clients).
type Clients interface {
	// Register binds clientID to wallet, which signed sig over both, and
	// returns the binding once applied (client_bound_elsewhere,
	// client_limit_reached, invalid_signature: nothing changed).
	Register(ctx context.Context, clientID string, wallet common.Address, sig []byte) (api.ClientRegistration, error)
	// Binding is a client id's registration; ok false when it is unbound.
	Binding(clientID string) (api.ClientRegistration, bool, error)
}

// Heads is this validator's applied state as the head routes read it
// (state.Machine).
type Heads interface {
	AppliedIndex() uint64
	StateHash() [32]byte
	// SegmentHead is the newest segment at or below index.
	SegmentHead(index uint64) (segIndex uint64, hash [32]byte, ok bool, err error)
}

// HeadBook is where the leader keeps each member's newest head report
// (headreport.Book).
type HeadBook interface {
	Put(r api.HeadUpdate, at time.Time, members []uint64)
	Get(id uint64) (headreport.Report, bool)
}

// LocalValue is one value this validator keeps for itself
// (storage.LocalValue): the public URL.
type LocalValue interface {
	Load() ([]byte, error)
	Save(data []byte) error
}

// jsonBody reads a JSON request body, bounded like every other
// (limitBody), and keeps it for forwarding to the leader.
func (s *Server) jsonBody(c echo.Context) ([]byte, error) {
	mediaType, _, err := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	if err != nil || mediaType != echo.MIMEApplicationJSON {
		return nil, apierror.Field("Content-Type", "must be application/json")
	}
	raw, err := io.ReadAll(c.Request().Body)
	switch {
	case httpserver.IsTooLarge(err):
		return nil, httpserver.TooLarge(s.bodyLimit(c.Request().Method, c.Path()))
	case err != nil:
		return nil, apierror.New(apierror.InvalidField, "the request body could not be read: %v", err)
	}
	c.Request().Body = io.NopCloser(bytes.NewReader(raw))
	return raw, nil
}

// registerRequest is a parsed POST /v1/register-client body.
type registerRequest struct {
	clientID  string
	wallet    common.Address
	signature []byte
}

// parseRegisterClient parses and checks a POST /v1/register-client body;
// the error names the field.
func parseRegisterClient(raw []byte) (registerRequest, error) {
	var body api.RegisterClientRequest
	if err := decodeObject(raw, &body); err != nil {
		return registerRequest{}, err
	}
	if err := signing.CheckClientID(body.ClientID); err != nil {
		return registerRequest{}, apierror.Field("clientId", "%v", err)
	}
	wallet, err := parseWallet(body.Wallet, "wallet")
	if err != nil {
		return registerRequest{}, err
	}
	sig, err := signing.ParseSignature(body.Signature)
	if err != nil {
		return registerRequest{}, apierror.Field("signature", "%v: the wallet's EIP-712 signature over ClientRegistration(clientId, wallet)", err)
	}
	return registerRequest{clientID: body.ClientID, wallet: wallet, signature: sig}, nil
}

// registerClient serves POST /v1/register-client: {"clientId", "wallet",
// "signature"} binds the client id to the wallet through raft, on the
// leader (a follower forwards). 200 with the binding, also when it was
// bound to this wallet already; 409 client_bound_elsewhere,
// client_limit_reached; 401 invalid_signature.
func (s *Server) registerClient(c echo.Context) error {
	raw, err := s.jsonBody(c)
	if err != nil {
		return err
	}
	req, err := parseRegisterClient(raw)
	if err != nil {
		return err
	}
	// Registrations are not paid for: the proposals' per-client rate
	// (RATE_PER_IP) bounds what one client adds, where it first arrives.
	if err := s.limitIP(c); err != nil {
		return err
	}
	if handled, err := s.forward(c); handled {
		return err
	}
	reg, err := s.deps.ClientRegistrations.Register(c.Request().Context(), req.clientID, req.wallet, req.signature)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, reg)
}

// clientRegistration serves GET /v1/register-client/{clientId} from
// applied state: 404 when the client id is unbound.
func (s *Server) clientRegistration(c echo.Context) error {
	id := c.Param("clientId")
	if err := signing.CheckClientID(id); err != nil {
		return apierror.Field("clientId", "%v", err)
	}
	reg, ok, err := s.deps.ClientRegistrations.Binding(id)
	switch {
	case err != nil:
		return err
	case !ok:
		return apierror.New(apierror.NotFound, "client id %q is not registered", id)
	}
	return c.JSON(http.StatusOK, reg)
}

// head serves GET /v1/head: this validator's segment-chain head at its
// applied index.
func (s *Server) head(c echo.Context) error {
	st := s.deps.Cluster.Status()
	applied := s.deps.Heads.AppliedIndex()
	hash := s.deps.Heads.StateHash()
	out := api.Head{ContractVersion: api.HeadVersion, NodeID: st.NodeID, Term: st.Term, AppliedIndex: applied,
		StateHash: "0x" + hex.EncodeToString(hash[:])}
	idx, seg, ok, err := s.deps.Heads.SegmentHead(applied)
	if err != nil {
		return err
	}
	if ok {
		out.SegmentIndex, out.SegmentHash = idx, "0x"+hex.EncodeToString(seg[:])
	}
	return c.JSON(http.StatusOK, out)
}

// parseHeadUpdate parses and checks a POST /v1/follower/head-update body.
func parseHeadUpdate(raw []byte) (api.HeadUpdate, error) {
	var r api.HeadUpdate
	if err := decodeObject(raw, &r); err != nil {
		return r, err
	}
	if field, err := headreport.CheckUpdate(r); err != nil {
		return r, apierror.Field(field, "%v", err)
	}
	return r, nil
}

// followerHeadUpdate serves POST /v1/follower/head-update: a follower's
// report of its head, kept by the leader for the replication views. It
// takes the operator lane's token (authentication) and is believed only
// from the address of the member it names (a token holder elsewhere cannot
// speak for a member); a validator that does not lead answers
// leader_unknown, naming the leader it knows.
func (s *Server) followerHeadUpdate(c echo.Context) error {
	var raw json.RawMessage
	if err := s.jsonObject(c, &raw); err != nil {
		return err
	}
	r, err := parseHeadUpdate(raw)
	if err != nil {
		return err
	}
	st := s.deps.Cluster.Status()
	if st.Role != api.RoleLeader {
		return apierror.New(apierror.LeaderUnknown, "validator %d does not lead; report to the leader (%d, 0: unknown)", st.NodeID, st.Leader).
			WithDetail("leader", st.Leader)
	}
	var members []uint64
	for _, m := range s.deps.Cluster.Members() {
		members = append(members, m.ID)
	}
	switch {
	case r.NodeID == st.NodeID || !slices.Contains(members, r.NodeID):
		return apierror.Field("nodeId", "must be the raft id of another member of this cluster")
	case !s.isMemberAddress(strconv.FormatUint(r.NodeID, 10), c.RealIP()):
		return apierror.New(apierror.Forbidden, "a head report for member %d must come from that member's address", r.NodeID)
	}
	at := s.now().UTC()
	s.deps.HeadReports.Put(r, at, members)
	view, err := s.followerHead(headreport.Report{HeadUpdate: r, At: at})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, view)
}

// fromMember reports whether ip is the address of a member of the
// cluster.
func (s *Server) fromMember(ip string) bool {
	if s.deps.Cluster == nil {
		return false
	}
	for _, m := range s.deps.Cluster.Members() {
		if s.isMemberAddress(strconv.FormatUint(m.ID, 10), ip) {
			return true
		}
	}
	return false
}

// followerHead renders a report with its agreement with this validator's
// segment chain.
func (s *Server) followerHead(r headreport.Report) (*api.FollowerHead, error) {
	agreement, err := headreport.Agreement(r.HeadUpdate, s.deps.Heads)
	if err != nil {
		return nil, err
	}
	return &api.FollowerHead{AppliedIndex: r.AppliedIndex, SegmentIndex: r.SegmentIndex, SegmentHash: r.SegmentHash,
		ReportedAt: r.At, Agreement: agreement}, nil
}

// withHeads adds to the leader's replication view each member's newest
// head report, and the leader's own head.
func (s *Server) withHeads(lag api.ReplicationLag) (api.ReplicationLag, error) {
	if !lag.IsLeader || s.deps.HeadReports == nil || s.deps.Heads == nil {
		return lag, nil
	}
	for i := range lag.Nodes {
		n := &lag.Nodes[i]
		var (
			r  headreport.Report
			ok bool
		)
		if n.NodeID == lag.NodeID {
			own, err := headreport.HeadOf(n.NodeID, s.deps.Heads)
			if err != nil {
				return lag, err
			}
			r, ok = headreport.Report{HeadUpdate: own, At: s.now().UTC()}, true
		} else {
			r, ok = s.deps.HeadReports.Get(n.NodeID)
		}
		if !ok {
			continue
		}
		view, err := s.followerHead(r)
		if err != nil {
			return lag, err
		}
		n.Head = view
	}
	return lag, nil
}

// publicURL is the public URL this validator advertises, and where it
// comes from.
func (s *Server) publicURL() (api.PublicURL, error) {
	out := api.PublicURL{ContractVersion: api.PublicURLVersion, NodeID: s.deps.Cluster.Status().NodeID, Source: api.PublicURLNone}
	saved, err := s.deps.PublicURL.Load()
	switch {
	case err != nil:
		return out, fmt.Errorf("reading the public URL: %w", err)
	case len(saved) > 0:
		out.URL, out.Source = string(saved), api.PublicURLOperator
	case s.cfg.PublicURL != "":
		out.URL, out.Source = s.cfg.PublicURL, api.PublicURLSetting
	}
	return out, nil
}

// getPublicURL serves GET /v1/ngrok-url.
func (s *Server) getPublicURL(c echo.Context) error {
	out, err := s.publicURL()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// parsePublicURL parses a POST /v1/ngrok-url body: {"url": "https://…"};
// "" clears the operator's URL (the setting's applies again).
func parsePublicURL(raw []byte) (string, error) {
	var body struct {
		URL *string `json:"url"`
	}
	if err := decodeObject(raw, &body); err != nil {
		return "", err
	}
	if body.URL == nil {
		return "", apierror.Field("url", "is required: the absolute http or https URL this validator advertises (\"\": back to SVC_VALIDATOR_PUBLIC_URL)")
	}
	if *body.URL == "" {
		return "", nil
	}
	if err := api.CheckPublicURL(*body.URL); err != nil {
		return "", apierror.Field("url", "%v", err)
	}
	return *body.URL, nil
}

// setPublicURL serves POST /v1/ngrok-url (operator lane): keeps the URL in
// this validator's local store (not replicated; kept across restarts) and
// answers the URL now advertised.
func (s *Server) setPublicURL(c echo.Context) error {
	var raw json.RawMessage
	if err := s.jsonObject(c, &raw); err != nil {
		return err
	}
	u, err := parsePublicURL(raw)
	if err != nil {
		return err
	}
	if err := s.deps.PublicURL.Save([]byte(u)); err != nil {
		return fmt.Errorf("saving the public URL: %w", err)
	}
	return s.getPublicURL(c)
}
