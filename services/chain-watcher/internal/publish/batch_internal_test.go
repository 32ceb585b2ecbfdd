package publish

import "testing"

func TestAtLeast(t *testing.T) {
	for v, want := range map[string]bool{
		"2.12.0": true, "2.15.2": true, "v2.12.1": true, "3.0.0": true, "2.12.0-RC.1": true, "2.12-beta": true,
		"2.11.9": false, "2.2.0": false, "1.99.0": false, "": false, "2": false, "x.y": false,
	} {
		if got := atLeast(v, 2, 12); got != want {
			t.Errorf("atLeast(%q, 2, 12) = %v", v, got)
		}
	}
}

func TestSmallerBatch(t *testing.T) {
	for _, c := range []struct {
		desc    string
		n, want int
	}{
		{"atomic publish batch is too large: 100", 1000, 100},
		{"atomic publish batch is too large: 1000", 1000, 500}, // not smaller: halve
		{"atomic publish batch is too large", 10, 5},
		{"atomic publish batch is too large: 0", 10, 5},
		{"", 1, 1},
	} {
		if got := smallerBatch(c.desc, c.n); got != c.want {
			t.Errorf("smallerBatch(%q, %d) = %d, want %d", c.desc, c.n, got, c.want)
		}
	}
}
