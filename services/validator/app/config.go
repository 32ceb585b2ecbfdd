package app

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Mode is the deployment mode of the contract.
type Mode string

const (
	// Mock checks signatures but no payments.
	Mock Mode = "MOCK"
	// Testnet verifies payments against the configured contract.
	Testnet Mode = "TESTNET"
	// Mainnet verifies payments, in production.
	Mainnet Mode = "MAINNET"
)

// Config is the validator's configuration, read from the environment with
// the prefix SVC_VALIDATOR (DECISIONS D10). There is no default mode: a
// validator that silently skipped payment checks would be a costly mistake.
type Config struct {
	Mode      Mode   `envconfig:"MODE" desc:"MOCK, TESTNET or MAINNET; required"`
	NodeID    uint64 `envconfig:"NODE_ID" default:"1" desc:"raft id of this validator, unique in the cluster"`
	ClusterID string `envconfig:"CLUSTER_ID" default:"contentledger-local" desc:"name of the cluster"`
	DataDir   string `envconfig:"DATA_DIR" default:"./data/validator-1" desc:"directory of the Pebble database"`
	HTTPAddr  string `envconfig:"HTTP_ADDR" default:"0.0.0.0:8090" desc:"address of the HTTP API"`
	AuthToken string `envconfig:"AUTH_TOKEN" desc:"bearer token required on every route but /health*; unset: none"`

	ChainID         uint64 `envconfig:"CHAIN_ID" default:"1337" desc:"chain id of the payment contract (EIP-712 domain)"`
	ContractAddress string `envconfig:"CONTRACT_ADDRESS" desc:"payment contract address; required unless MOCK"`
	Confirmations   uint64 `envconfig:"CONFIRMATIONS" default:"2" desc:"confirmations the chain-watcher waits for (published in /v1/blockchain/config)"`
	USDCAddress     string `envconfig:"USDC_ADDRESS" desc:"stablecoin token address, published for clients"`

	NATSURL       string        `envconfig:"NATS_URL" default:"nats://127.0.0.1:4222" desc:"NATS server with JetStream"`
	PaymentStream string        `envconfig:"PAYMENT_STREAM" default:"CHAIN_EVENTS" desc:"JetStream stream the chain-watcher publishes payments to"`
	PaymentWait   time.Duration `envconfig:"PAYMENT_WAIT" default:"2m" desc:"how long a proposal waits for its payment before payment_not_found"`

	ContentRoot     string        `envconfig:"CONTENT_ROOT" default:"ledger" desc:"first segment of every content path"`
	MaxMessageBytes int           `envconfig:"MAX_MESSAGE_BYTES" default:"1048576" desc:"largest message accepted"`
	EpochLength     time.Duration `envconfig:"EPOCH_LENGTH" default:"384s" desc:"length of an epoch"`
	TickInterval    time.Duration `envconfig:"TICK_INTERVAL" default:"100ms" desc:"raft tick; 100ms or more in production"`
	MaxPending      int           `envconfig:"MAX_PENDING" default:"10000" desc:"proposals in flight before intake answers 429"`
	MaxBatch        int           `envconfig:"MAX_BATCH" default:"512" desc:"proposals per raft entry"`
	NoSync          bool          `envconfig:"NO_SYNC" default:"false" desc:"skip fsync; tests and benchmarks only"`
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	var errs []error
	switch c.Mode {
	case Mock, Testnet, Mainnet:
	default:
		errs = append(errs, fmt.Errorf("SVC_VALIDATOR_MODE is %q; set MOCK, TESTNET or MAINNET", c.Mode))
	}
	if c.Mode != Mock && !common.IsHexAddress(c.ContractAddress) {
		errs = append(errs, fmt.Errorf("SVC_VALIDATOR_CONTRACT_ADDRESS %q is not an address (required in %s mode)", c.ContractAddress, c.Mode))
	}
	if c.ContractAddress != "" && !common.IsHexAddress(c.ContractAddress) {
		errs = append(errs, fmt.Errorf("SVC_VALIDATOR_CONTRACT_ADDRESS %q is not an address", c.ContractAddress))
	}
	if c.NodeID == 0 {
		errs = append(errs, errors.New("SVC_VALIDATOR_NODE_ID must not be 0"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("SVC_VALIDATOR_DATA_DIR is empty"))
	}
	if c.MaxMessageBytes <= 0 || c.EpochLength <= 0 || c.PaymentWait <= 0 {
		errs = append(errs, errors.New("SVC_VALIDATOR_MAX_MESSAGE_BYTES, EPOCH_LENGTH and PAYMENT_WAIT must be positive"))
	}
	if strings.Contains(c.ContentRoot, "/") || c.ContentRoot == "" {
		errs = append(errs, fmt.Errorf("SVC_VALIDATOR_CONTENT_ROOT %q must be one path segment", c.ContentRoot))
	}
	return errors.Join(errs...)
}

// VerifiesPayments reports whether the mode checks payments.
func (c Config) VerifiesPayments() bool { return c.Mode != Mock }
