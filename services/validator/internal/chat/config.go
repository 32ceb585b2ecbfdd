package chat

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// Defaults of Config.
const (
	DefaultTimeout              = 60 * time.Second
	DefaultMaxRounds            = 4
	DefaultMaxToolResultBytes   = 16 << 10
	DefaultMaxConversationBytes = 32 << 10
	// DefaultMaxMessages bounds the messages of one request.
	DefaultMaxMessages = 64
	// DefaultMaxToolCalls bounds the reads one round may ask for; the
	// rest are answered as tool errors.
	DefaultMaxToolCalls = 8
	// DefaultMaxResponseBytes bounds one answer of the endpoint.
	DefaultMaxResponseBytes = 1 << 20
	// DefaultMaxAnswers bounds the answers in progress at once on this
	// validator: each holds a request to the endpoint.
	DefaultMaxAnswers = 4
)

// Config is the assistant's configuration. URL empty: no assistant.
type Config struct {
	// URL is the base URL of an OpenAI-compatible API (for example
	// http://127.0.0.1:11434/v1 for Ollama); /chat/completions is appended.
	URL string
	// Model is the model the endpoint is asked for.
	Model string
	// KeyFile holds the API key sent as "Authorization: Bearer <key>";
	// empty: none (a local Ollama needs none). Only the path is ever
	// shown.
	KeyFile string
	// Timeout bounds one answer: every round and every read.
	Timeout time.Duration
	// MaxRounds bounds the completions in which the model may ask for
	// reads; one more, without tools, asks for the answer.
	MaxRounds int
	// MaxToolResultBytes bounds the body of one read handed to the model.
	MaxToolResultBytes int
	// MaxConversationBytes bounds the body of a request (the conversation
	// a client sends).
	MaxConversationBytes int
	// MaxMessages, MaxToolCalls, MaxResponseBytes and MaxAnswers: see
	// their defaults.
	MaxMessages      int
	MaxToolCalls     int
	MaxResponseBytes int
	MaxAnswers       int
}

// WithDefaults returns c with every zero limit set to its default.
func (c Config) WithDefaults() Config {
	set := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	set(&c.MaxRounds, DefaultMaxRounds)
	set(&c.MaxToolResultBytes, DefaultMaxToolResultBytes)
	set(&c.MaxConversationBytes, DefaultMaxConversationBytes)
	set(&c.MaxMessages, DefaultMaxMessages)
	set(&c.MaxToolCalls, DefaultMaxToolCalls)
	set(&c.MaxResponseBytes, DefaultMaxResponseBytes)
	set(&c.MaxAnswers, DefaultMaxAnswers)
	return c
}

// Enabled reports whether an endpoint is configured.
func (c Config) Enabled() bool { return c.URL != "" }

// Validate reports a configuration the assistant cannot run with. It reads
// no file (New does) and never quotes the key.
func (c Config) Validate() error {
	if !c.Enabled() {
		if c.Model != "" || c.KeyFile != "" {
			return errors.New("a chat model or key file is set without a chat URL")
		}
		return nil
	}
	var errs []error
	if _, err := parseBase(c.URL); err != nil {
		errs = append(errs, err)
	}
	if strings.TrimSpace(c.Model) == "" {
		errs = append(errs, errors.New("the chat model is required with a chat URL"))
	}
	d := c.WithDefaults()
	if d.Timeout < 0 || d.MaxRounds < 0 || d.MaxToolResultBytes < 0 || d.MaxConversationBytes < 0 || d.MaxMessages < 0 ||
		d.MaxToolCalls < 0 || d.MaxResponseBytes < 0 || d.MaxAnswers < 0 {
		errs = append(errs, errors.New("the chat timeout and limits must not be negative (0: the default)"))
	}
	if d.MaxToolResultBytes > d.MaxResponseBytes {
		errs = append(errs, fmt.Errorf("the chat tool result limit %d is above the endpoint's answer limit %d", d.MaxToolResultBytes, d.MaxResponseBytes))
	}
	return errors.Join(errs...)
}

// CleartextKey reports whether the key would travel in clear text to
// another host: a key file with a plain-http URL whose host is not
// loopback.
func (c Config) CleartextKey() bool {
	u, err := parseBase(c.URL)
	return err == nil && c.KeyFile != "" && u.Scheme == "http" && !loopback(u.Hostname())
}

// parseBase parses the endpoint's base URL: http or https, a host, no
// credentials (the key belongs in the key file, never in a URL that
// configuration views show), no query or fragment.
func parseBase(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, errors.New("the chat URL does not parse")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("the chat URL must be http or https")
	case u.Host == "":
		return nil, errors.New("the chat URL has no host")
	case u.User != nil:
		return nil, errors.New("the chat URL must not carry credentials: put the key in the chat key file")
	case u.RawQuery != "" || u.Fragment != "":
		return nil, errors.New("the chat URL must have no query or fragment")
	}
	return u, nil
}

// loopback reports whether host names this machine.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// readKey reads the key file: one line, the key, with no spaces or control
// characters (it travels in a header). Errors name the file, never its
// content.
func readKey(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("chat key file: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("chat key file %s is empty", path)
	}
	for _, r := range key {
		if r <= ' ' || r == 0x7f {
			return "", fmt.Errorf("chat key file %s must hold one key on one line, without spaces or control characters", path)
		}
	}
	return key, nil
}
