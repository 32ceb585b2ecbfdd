package system

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/segarchive"
)

// sameArchives checks the segment chain the way a backup would read it: every
// TAR file downloaded from every running validator as a segment archive
// (GET /segments/{name}) is the same bytes, and the archives in order verify
// as one chain to the head the listing names. Validators that applied the
// same entries must agree byte for byte, however they got there (a snapshot
// included), and their journals (GET /journal.log) are the same text.
// Polls until they do, within a deadline.
func (c *cluster) sameArchives(running ...*node) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := archivesAgree(running)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("segment archives do not agree within 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // polling the validators
	}
}

func archivesAgree(running []*node) error {
	var first api.SegmentTars
	for i, n := range running {
		var tars api.SegmentTars
		if err := get(n.url()+"/api/segments/tars", &tars); err != nil {
			return fmt.Errorf("validator %d: %v", n.id, err)
		}
		if i == 0 {
			first = tars
			continue
		}
		if !slices.Equal(tars.Tars, first.Tars) {
			return fmt.Errorf("validator %d lists %+v, validator %d %+v", n.id, tars.Tars, running[0].id, first.Tars)
		}
	}
	if len(first.Tars) == 0 {
		return fmt.Errorf("no TAR file listed")
	}
	var chain segarchive.Chain
	for _, f := range first.Tars {
		var want []byte
		for i, n := range running {
			body, err := fetchArchive(n.url() + "/segments/" + f.Name)
			if err != nil {
				return fmt.Errorf("validator %d: %v", n.id, err)
			}
			if i == 0 {
				want = body
				continue
			}
			if !bytes.Equal(body, want) {
				return fmt.Errorf("validator %d's %s differs from validator %d's", n.id, f.Name, running[0].id)
			}
		}
		s, err := chain.Verify(bytes.NewReader(want))
		if err != nil {
			return fmt.Errorf("%s: %v", f.Name, err)
		}
		if s.Segments != f.Segments || s.LastIndex != f.LastIndex {
			return fmt.Errorf("%s holds %d segments to %d, listed %d to %d", f.Name, s.Segments, s.LastIndex, f.Segments, f.LastIndex)
		}
	}
	return journalsAgree(running, first.Tars[len(first.Tars)-1].HeadHash)
}

// journalsAgree checks that every validator's /journal.log is the same
// text, ending at head.
func journalsAgree(running []*node, head string) error {
	var want []string
	for i, n := range running {
		body, err := fetchArchive(n.url() + "/journal.log")
		if err != nil {
			return fmt.Errorf("validator %d: %v", n.id, err)
		}
		lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
		if i == 0 {
			want = lines
			continue
		}
		for j := range max(len(lines), len(want)) {
			if j >= len(lines) || j >= len(want) || lines[j] != want[j] {
				return fmt.Errorf("validator %d's journal (%d lines) parts from validator %d's (%d lines) at line %d", n.id, len(lines), running[0].id, len(want), j+1)
			}
		}
	}
	if last := want[len(want)-1]; !strings.HasSuffix(last, " hash="+head) {
		return fmt.Errorf("the journal ends with %q, not at the head %s", last, head)
	}
	return nil
}

func fetchArchive(u string) ([]byte, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}
