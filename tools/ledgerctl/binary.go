package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/contentledger/contentledger/pkg/api"
	"github.com/contentledger/contentledger/pkg/blob"
	"github.com/contentledger/contentledger/pkg/payment"
	"github.com/contentledger/contentledger/pkg/proposal"
	"github.com/contentledger/contentledger/tools/ledgerclient"
)

// put adds a file to IPFS, records its upload (docs/adr/0037: declare
// the intent, then complete it with the CID, which the validator checks
// through its gateway) and writes an asset node naming the CID.
func put(ctx context.Context, args []string, out, progressOut io.Writer) error {
	fs := flag.NewFlagSet("put", flag.ContinueOnError)
	var c commonFlags
	c.register(fs)
	ipfsAPI := fs.String("ipfs-api", envOr("LEDGER_IPFS_API", "http://127.0.0.1:5001"), "IPFS RPC API the file is added through (kubo's /api/v0/add)")
	cidVersion := fs.Int("cid-version", 1, "CID version the file is added under: 0 (Qm…) or 1 (b…, raw leaves)")
	mimeType := fs.String("mime", "", "MIME type (default: from the file name's extension, else application/octet-stream)")
	org := fs.String("org", "", "organization (default \"default\")")
	path := fs.String("path", "", "node path below the organization (default assets/<file name>)")
	tier := fs.String("tier", "standard", "payment class: standard, express or priority")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("put takes one FILE\n\n%s", usage)
	}
	if *cidVersion != 0 && *cidVersion != 1 {
		return fmt.Errorf("--cid-version must be 0 or 1")
	}
	key, err := parseKey(c.key)
	if err != nil {
		return err
	}
	class, err := payment.ParseClass(*tier)
	if err != nil {
		return err
	}
	file := fs.Arg(0)
	name := filepath.Base(file)
	if *mimeType == "" {
		if *mimeType, _, _ = strings.Cut(mime.TypeByExtension(filepath.Ext(name)), ";"); *mimeType == "" {
			*mimeType = "application/octet-stream"
		}
	}
	if *path == "" {
		*path = "assets/" + name
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	progress := c.progress(progressOut)

	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	if size == 0 {
		return fmt.Errorf("%s is empty: there is no binary to record", file)
	}
	id := blob.ID(h.Sum(nil))
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	cid, err := ledgerclient.AddToIPFS(ctx, &http.Client{}, *ipfsAPI, name, f, *cidVersion)
	if err != nil {
		return fmt.Errorf("adding %s to IPFS at %s: %w", file, *ipfsAPI, err)
	}
	progress("added %s to IPFS: %s (%d bytes, blob id %s)", file, cid, size, id)

	client := c.client()
	cfg, err := blockchainConfig(ctx, client)
	if err != nil {
		return err
	}
	intent, err := client.DeclareIntent(ctx, cfg, key, ledgerclient.Upload{Size: uint64(size), MimeType: *mimeType, ID: id})
	if err != nil {
		return describe(err)
	}
	progress("declared upload intent %s: %s", intent.Token, intent.Status)
	if intent, err = client.CompleteUpload(ctx, intent.Token, cid); err != nil {
		return describe(err)
	}
	progress("upload checked and recorded: %s", intent.Status)

	message, err := json.Marshal(map[string]any{proposal.CIDProperty: cid, "blobId": id.String(), "mimeType": *mimeType,
		"size": size, "fileName": name})
	if err != nil {
		return err
	}
	p := &ledgerclient.Proposal{Action: proposal.Write, Organization: *org, ContentType: "asset", Path: *path, Class: class, Message: message}
	return submit(ctx, &c, cfg, key, p, &intent, out, progress)
}

// get prints the node at a path and, for an asset (a node naming a
// recorded blob), writes its bytes, read through the validator and
// checked against the blob id, to --out.
func get(ctx context.Context, args []string, out, progressOut io.Writer) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	var c commonFlags
	c.register(fs)
	org := fs.String("org", proposal.DefaultOrganization, "organization, for a PATH below your wallet's (needs --key)")
	outFile := fs.String("out", "", "write an asset's bytes to this file (- for stdout)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("get takes one PATH\n\n%s", usage)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	client := c.client()
	path := fs.Arg(0)
	if !strings.HasPrefix(path, "/") {
		key, err := parseKey(c.key)
		if err != nil {
			return fmt.Errorf("%s is not a full path (/…); a path below your organization needs --key: %w", path, err)
		}
		cfg, err := blockchainConfig(ctx, client)
		if err != nil {
			return err
		}
		path = proposal.ContentPath(cfg.ContentRoot, crypto.PubkeyToAddress(key.PublicKey), *org, path)
	}
	node, err := client.Node(ctx, path)
	if err != nil {
		return describe(err)
	}
	id, isAsset := assetBlob(node)
	if *outFile == "" || !isAsset {
		if *outFile != "" {
			return fmt.Errorf("%s names no recorded binary (no blobId property)", path)
		}
		return printJSON(out, node)
	}
	w := out
	if *outFile != "-" {
		f, err := os.Create(*outFile)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	n, err := client.Blob(ctx, id, w)
	if err != nil {
		return describe(err)
	}
	c.progress(progressOut)("%s: %d bytes of blob %s", path, n, id)
	return nil
}

// assetBlob is the blob id an asset node names.
func assetBlob(n api.Node) (blob.ID, bool) {
	var text string
	if raw, ok := n.Properties["blobId"]; !ok || json.Unmarshal(raw, &text) != nil {
		return blob.ID{}, false
	}
	id, _, err := blob.ParseID(text)
	return id, err == nil
}
