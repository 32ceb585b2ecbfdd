// Package settings describes a service's configuration from its own Config
// struct, so that the configuration views (/v1/config/osgi/*) need no second
// list to keep: every field with an envconfig name is a setting, its
// default and description come from its default and desc tags, and what the
// tags do not say (component, risk, secrets, defaults that depend on other
// settings) comes from Options.
package settings

import (
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/contentledger/contentledger/services/validator/internal/blobgateway"
)

// Redacted stands for the value of a secret that is set.
const Redacted = "<redacted>"

// Options say what a Config's tags do not.
type Options struct {
	// Prefix is the environment prefix of every key, e.g. SVC_VALIDATOR_.
	Prefix string
	// Classify gives a setting's component and the risk of changing it
	// (high, medium, low); ok is false for a name it does not know.
	Classify func(name string) (component, risk string, ok bool)
	// Secrets are the settings whose value is never shown.
	Secrets []string
	// URLs are the settings holding URLs (a comma-separated list of them)
	// that may carry credentials, which are redacted.
	URLs []string
	// Enums are the values a setting takes, by name.
	Enums map[string][]string
	// Defaults override the default tag where the default depends on other
	// settings (the mode, say), by name.
	Defaults map[string]string
}

// Setting is one field of a Config, described.
type Setting struct {
	// Name is the envconfig name; Key, the environment variable.
	Name, Key string
	// Component and Risk, from Options.Classify; empty when it does not
	// know the name.
	Component, Risk string
	// Type is boolean, integer, number, duration, string or secret.
	Type string
	Enum []string
	// Default is the default as the tag (or Options.Defaults) writes it;
	// "" when there is none.
	Default     string
	Description string
	Secret      bool

	urlCredentials bool
	value          reflect.Value
	defValue       any // Default parsed to the field's type; nil when none or unparsable
}

// Describe describes every field of cfg, a struct, that has an envconfig
// name, in field order.
func Describe(cfg any, opts Options) []Setting {
	v := reflect.ValueOf(cfg)
	t := v.Type()
	var out []Setting
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("envconfig")
		if name == "" {
			continue
		}
		s := Setting{Name: name, Key: opts.Prefix + name, Type: typeName(f.Type), Default: f.Tag.Get("default"),
			Description: f.Tag.Get("desc"), Enum: opts.Enums[name], value: v.Field(i)}
		if opts.Classify != nil {
			s.Component, s.Risk, _ = opts.Classify(name)
		}
		if def, ok := opts.Defaults[name]; ok {
			s.Default = def
		}
		for _, secret := range opts.Secrets {
			s.Secret = s.Secret || secret == name
		}
		if s.Secret {
			s.Type = "secret"
		}
		for _, u := range opts.URLs {
			s.urlCredentials = s.urlCredentials || u == name
		}
		if s.Default != "" {
			if d, ok := parse(f.Type, s.Default); ok {
				s.defValue = d
			}
		}
		out = append(out, s)
	}
	return out
}

// DefaultParses reports whether the default, when there is one, parses as
// the setting's type.
func (s Setting) DefaultParses() bool { return s.Default == "" || s.defValue != nil }

// Value is the effective value as the views show it: durations as Go
// writes them, secrets and the credentials in URLs redacted.
func (s Setting) Value() any {
	if s.Secret {
		if s.value.String() == "" {
			return ""
		}
		return Redacted
	}
	if s.urlCredentials && s.value.String() != "" {
		return redactURLs(s.value.String())
	}
	return render(s.value)
}

// DefaultValue is the default as the views show it: parsed and rendered
// like Value, or as written when it does not parse.
func (s Setting) DefaultValue() any {
	if s.defValue == nil {
		return s.Default
	}
	return render(reflect.ValueOf(s.defValue))
}

// IsDefault reports whether the effective value is the default (the zero
// value when there is none).
func (s Setting) IsDefault() bool {
	if s.defValue == nil {
		return s.value.IsZero()
	}
	return reflect.DeepEqual(s.value.Interface(), s.defValue)
}

// Source says where the effective value comes from: "env" when the
// variable is set in the process environment to this value, "default" when
// it is the default and the variable is unset, "caller" otherwise (the
// program that started the service set it, as tools/devnet and the tests
// do in-process).
func (s Setting) Source() (source string, envSet bool) {
	raw, envSet := os.LookupEnv(s.Key)
	if envSet {
		if v, ok := parse(s.value.Type(), raw); ok && reflect.DeepEqual(v, s.value.Interface()) {
			return "env", true
		}
		return "caller", true
	}
	if s.IsDefault() {
		return "default", false
	}
	return "caller", false
}

// redactURLs redacts the credentials of each URL of a comma-separated list
// (a NATS token is the user name, so that goes too); one that does not
// parse is redacted whole.
func redactURLs(list string) string {
	urls := strings.Split(list, ",")
	for i, raw := range urls {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			urls[i] = Redacted
			continue
		}
		urls[i] = blobgateway.Redacted(u)
	}
	return strings.Join(urls, ",")
}

// render is a value as JSON shows it: a duration as Go writes it, a named
// string type as its string.
func render(v reflect.Value) any {
	if v.Type() == reflect.TypeFor[time.Duration]() {
		return time.Duration(v.Int()).String()
	}
	if v.Kind() == reflect.String {
		return v.String()
	}
	return v.Interface()
}

// parse parses raw to typ as envconfig does, for the kinds a Config uses.
func parse(typ reflect.Type, raw string) (any, bool) {
	if typ == reflect.TypeFor[time.Duration]() {
		d, err := time.ParseDuration(raw)
		return d, err == nil
	}
	v := reflect.New(typ).Elem()
	switch typ.Kind() {
	case reflect.String:
		v.SetString(raw)
	case reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return nil, false
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(raw, 0, 64)
		if err != nil {
			return nil, false
		}
		v.SetInt(n)
	case reflect.Uint64:
		n, err := strconv.ParseUint(raw, 0, 64)
		if err != nil {
			return nil, false
		}
		v.SetUint(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return nil, false
		}
		v.SetFloat(f)
	default:
		return nil, false
	}
	return v.Interface(), true
}

func typeName(t reflect.Type) string {
	if t == reflect.TypeFor[time.Duration]() {
		return "duration"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64, reflect.Uint64:
		return "integer"
	case reflect.Float64:
		return "number"
	}
	return "string"
}
