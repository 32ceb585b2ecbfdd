package pipeline

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/contentledger/contentledger/pkg/ledgerpb"
)

// TestPacker runs the golden files in testdata/packer. Commands:
//
//	packer micro=<proposals> micro-bytes=<bytes>   a new, empty packing buffer
//	add at=<duration>                              queue the input's proposals, one a line:
//	  <name> epoch=<n> class=standard|express|priority wallet=<w> [org=<o>] [bytes=<n>]
//	take room=<n> bytes=<n> now=<duration> [aging=<duration>]
//
// add and take print the buffer afterwards, take the names it released
// first. Durations count from a fixed instant.
func TestPacker(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	datadriven.Walk(t, "testdata/packer", func(t *testing.T, path string) {
		var k *packer
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "packer":
				var micro, microBytes int
				d.ScanArgs(t, "micro", &micro)
				d.ScanArgs(t, "micro-bytes", &microBytes)
				k = newPacker(micro, microBytes)
				// The cases are written in message bytes.
				k.weigh = func(it *ledgerpb.BatchItem) int { return len(it.GetProposal().GetMessage()) }
				return ""
			case "add":
				var at time.Duration
				d.ScanArgs(t, "at", &at)
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					k.add(packerItem(t, line), t0.Add(at))
				}
				return describePacker(k)
			case "take":
				var room, maxBytes int
				var now, aging time.Duration
				d.ScanArgs(t, "room", &room)
				d.ScanArgs(t, "bytes", &maxBytes)
				d.ScanArgs(t, "now", &now)
				d.MaybeScanArgs(t, "aging", &aging)
				items := k.take(room, maxBytes, t0.Add(now), aging)
				names := make([]string, len(items))
				for i, it := range items {
					names[i] = it.GetProposal().GetPath()
				}
				return "released: " + strings.Join(names, " ") + "\n" + describePacker(k)
			}
			return "unknown command " + d.Cmd
		})
	})
}

// packerItem builds a batch item from "<name> key=value ...": the name is
// kept in the proposal's path.
func packerItem(t *testing.T, line string) *ledgerpb.BatchItem {
	fields := strings.Fields(line)
	prop := &ledgerpb.Proposal{Path: fields[0], Organization: "default"}
	for _, f := range fields[1:] {
		key, value, _ := strings.Cut(f, "=")
		switch key {
		case "epoch":
			epoch, err := strconv.ParseUint(value, 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			prop.Epoch = epoch
		case "class":
			tier, ok := ledgerpb.Tier_value["TIER_"+strings.ToUpper(value)]
			if !ok {
				t.Fatalf("%s: unknown class %q", line, value)
			}
			prop.Tier = ledgerpb.Tier(tier)
		case "wallet":
			prop.Wallet = []byte(value)
		case "org":
			prop.Organization = value
		case "bytes":
			n, err := strconv.Atoi(value)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			prop.Message = bytes.Repeat([]byte("m"), n)
		default:
			t.Fatalf("%s: unknown field %q", line, key)
		}
	}
	return &ledgerpb.BatchItem{Proposal: prop}
}

// describePacker prints the buckets in (epoch, class) order, each with its
// micro-batches in arrival order, and the totals.
func describePacker(k *packer) string {
	keys := make([]bucketKey, 0, len(k.buckets))
	for key := range k.buckets {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b bucketKey) int {
		return cmp.Or(cmp.Compare(a.epoch, b.epoch), cmp.Compare(a.class, b.class))
	})
	var out strings.Builder
	for _, key := range keys {
		fmt.Fprintf(&out, "epoch %d %s:", key.epoch, key.class.Name())
		for _, m := range k.buckets[key].micros {
			names := make([]string, len(m.items))
			for i, it := range m.items {
				names[i] = it.GetProposal().GetPath()
			}
			fmt.Fprintf(&out, " [%s]", strings.Join(names, " "))
		}
		out.WriteString("\n")
	}
	f := k.figures()
	fmt.Fprintf(&out, "items=%d bytes=%d micro-batches=%d buckets=%d oldest=%s", f.Items, f.Bytes, f.MicroBatches, f.Buckets, describeOldest(k))
	return out.String()
}

func describeOldest(k *packer) string {
	at := k.oldest()
	if at.IsZero() {
		return "-"
	}
	return at.Sub(time.Unix(1_700_000_000, 0)).String()
}
