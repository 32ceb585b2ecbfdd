module github.com/contentledger/contentledger/pkg

go 1.26

require (
	github.com/ethereum/go-ethereum v1.17.10
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/holiman/uint256 v1.3.2 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
