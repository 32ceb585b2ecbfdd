package harness

import (
	"regexp"
	"strconv"
)

// SumMetric sums every series of the metric family name in a Prometheus
// text exposition (a validator's /metrics body); 0 when it has none.
func SumMetric(body []byte, name string) (float64, error) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(?:\{[^}]*\})? (\S+)$`)
	var sum float64
	for _, m := range re.FindAllSubmatch(body, -1) {
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}
