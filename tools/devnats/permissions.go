package devnats

import (
	"github.com/nats-io/nats-server/v2/server"
)

// Role is who connects: each gets its own user and permissions.
type Role string

const (
	// Watcher is the chain-watcher: the one publisher of the chain feed
	// (chain.>) and of its key-value bucket.
	Watcher Role = "watcher"
	// Validator reads the chain feed and the watcher's bucket, and
	// publishes and manages the ledger's event stream.
	Validator Role = "validator"
	// Indexer reads the ledger's event stream, nothing else.
	Indexer Role = "indexer"
)

// Roles are every role, in a stable order.
var Roles = []Role{Watcher, Validator, Indexer}

// Credentials are a user and password of the server.
type Credentials struct {
	User, Password string
}

// Auth names what the permissions are about; zero values take the names
// the services default to.
type Auth struct {
	ChainStream   string // the watcher's stream of chain events (CHAIN_EVENTS), subjects chain.>
	ChainSubjects string // its subjects (chain.>)
	WatcherBucket string // the watcher's key-value bucket (CHAIN_WATCHER)
	EventStream   string // the validators' event stream (LEDGER_EVENTS)
	EventSubjects string // its subjects (ledger.events.>)
}

func (a Auth) withDefaults() Auth {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&a.ChainStream, "CHAIN_EVENTS")
	def(&a.ChainSubjects, "chain.>")
	def(&a.WatcherBucket, "CHAIN_WATCHER")
	def(&a.EventStream, "LEDGER_EVENTS")
	def(&a.EventSubjects, "ledger.events.>")
	return a
}

// Permissions are each role's: what it may publish (subjects and the
// JetStream API calls of its streams) and subscribe to (its inboxes, where
// JetStream answers and delivers). Everything else is refused. The same
// lists, in nats-server's configuration syntax, are in
// deployments/nats/nats-server.conf.
func (a Auth) Permissions() map[Role]*server.Permissions {
	a = a.withDefaults()
	kv := "KV_" + a.WatcherBucket
	inbox := &server.SubjectPermission{Allow: []string{"_INBOX.>"}}
	perm := func(publish ...[]string) *server.Permissions {
		var allow []string
		for _, p := range publish {
			allow = append(allow, p...)
		}
		return &server.Permissions{Publish: &server.SubjectPermission{Allow: allow}, Subscribe: inbox}
	}
	return map[Role]*server.Permissions{
		Watcher: perm([]string{a.ChainSubjects, "$KV." + a.WatcherBucket + ".>"},
			manageStream(a.ChainStream), manageStream(kv)),
		Validator: perm([]string{a.EventSubjects}, readStream(a.ChainStream), readStream(kv), manageStream(a.EventStream)),
		Indexer:   perm(readStream(a.EventStream)),
	}
}

// readStream is the JetStream API a reader of stream uses: its info, single
// messages (direct and not), and consumers of its own (ordered or durable)
// with their acknowledgements and flow control.
func readStream(stream string) []string {
	return []string{
		"$JS.API.INFO",
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.STREAM.MSG.GET." + stream,
		"$JS.API.DIRECT.GET." + stream,
		"$JS.API.DIRECT.GET." + stream + ".>",
		"$JS.API.CONSUMER.CREATE." + stream,
		"$JS.API.CONSUMER.CREATE." + stream + ".>",
		"$JS.API.CONSUMER.DURABLE.CREATE." + stream + ".*",
		"$JS.API.CONSUMER.INFO." + stream + ".*",
		"$JS.API.CONSUMER.DELETE." + stream + ".*",
		"$JS.API.CONSUMER.MSG.NEXT." + stream + ".*",
		"$JS.ACK." + stream + ".>",
		"$JS.FC." + stream + ".>",
	}
}

// manageStream adds to reading what declaring the stream takes: creating
// and updating it. Deleting or purging it is left to an administrator.
func manageStream(stream string) []string {
	return append(readStream(stream), "$JS.API.STREAM.CREATE."+stream, "$JS.API.STREAM.UPDATE."+stream)
}
