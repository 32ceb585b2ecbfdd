package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// GetJSON GETs u with client (nil: http.DefaultClient) within timeout and
// decodes a 200 answer's JSON body into out; any other status is an error.
func GetJSON(client *http.Client, timeout time.Duration, u string, out any) error {
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
