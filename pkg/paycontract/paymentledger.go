// Code generated via abigen V2 - DO NOT EDIT.
// This file is a generated binding and any manual changes will be lost.

package paycontract

import (
	"bytes"
	"errors"
	"math/big"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// Reference imports to suppress errors if they are not otherwise used.
var (
	_ = bytes.Equal
	_ = errors.New
	_ = big.NewInt
	_ = common.Big1
	_ = types.BloomLookup
	_ = abi.ConvertType
)

// PaymentLedgerMetaData contains all meta data concerning the PaymentLedger contract.
var PaymentLedgerMetaData = bind.MetaData{
	ABI: "[{\"inputs\":[{\"internalType\":\"address\",\"name\":\"usdcToken\",\"type\":\"address\"}],\"stateMutability\":\"nonpayable\",\"type\":\"constructor\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"proposalId\",\"type\":\"bytes32\"}],\"name\":\"AlreadyPaid\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"NotOwner\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"StablecoinDisabled\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"TokenTransferFailed\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"TransferFailed\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"expected\",\"type\":\"uint256\"},{\"internalType\":\"uint256\",\"name\":\"sent\",\"type\":\"uint256\"}],\"name\":\"WrongAmount\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"ZeroDebtPayment\",\"type\":\"error\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"wallet\",\"type\":\"address\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"payer\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"timestamp\",\"type\":\"uint256\"}],\"name\":\"DebtPaid\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"proposalId\",\"type\":\"bytes32\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"payer\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"},{\"indexed\":false,\"internalType\":\"enumPaymentLedger.Tier\",\"name\":\"tier\",\"type\":\"uint8\"},{\"indexed\":true,\"internalType\":\"enumPaymentLedger.PaymentToken\",\"name\":\"paymentToken\",\"type\":\"uint8\"},{\"indexed\":false,\"internalType\":\"address\",\"name\":\"preferredValidator\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"timestamp\",\"type\":\"uint256\"}],\"name\":\"ProposalPaid\",\"type\":\"event\"},{\"inputs\":[],\"name\":\"EXPRESS_PRICE_USDC\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"EXPRESS_PRICE_WEI\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"PRIORITY_PRICE_USDC\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"PRIORITY_PRICE_WEI\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"STANDARD_PRICE_USDC\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"STANDARD_PRICE_WEI\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"owner\",\"outputs\":[{\"internalType\":\"address\",\"name\":\"\",\"type\":\"address\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"\",\"type\":\"bytes32\"}],\"name\":\"paid\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"wallet\",\"type\":\"address\"}],\"name\":\"payDebt\",\"outputs\":[],\"stateMutability\":\"payable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"proposalId\",\"type\":\"bytes32\"},{\"internalType\":\"enumPaymentLedger.Tier\",\"name\":\"tier\",\"type\":\"uint8\"}],\"name\":\"payForProposal\",\"outputs\":[],\"stateMutability\":\"payable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"proposalId\",\"type\":\"bytes32\"},{\"internalType\":\"enumPaymentLedger.Tier\",\"name\":\"tier\",\"type\":\"uint8\"},{\"internalType\":\"address\",\"name\":\"preferredValidator\",\"type\":\"address\"}],\"name\":\"payForProposalPreferring\",\"outputs\":[],\"stateMutability\":\"payable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"proposalId\",\"type\":\"bytes32\"},{\"internalType\":\"enumPaymentLedger.Tier\",\"name\":\"tier\",\"type\":\"uint8\"}],\"name\":\"payForProposalWithToken\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"enumPaymentLedger.Tier\",\"name\":\"tier\",\"type\":\"uint8\"}],\"name\":\"priceUsdc\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"pure\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"enumPaymentLedger.Tier\",\"name\":\"tier\",\"type\":\"uint8\"}],\"name\":\"priceWei\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"pure\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"usdc\",\"outputs\":[{\"internalType\":\"contractIERC20\",\"name\":\"\",\"type\":\"address\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"weiAmount\",\"type\":\"uint256\"},{\"internalType\":\"uint256\",\"name\":\"usdcAmount\",\"type\":\"uint256\"}],\"name\":\"withdraw\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"}]",
	ID:  "PaymentLedger",
	Bin: "0x60c060405234801561000f575f5ffd5b50604051610a72380380610a7283398101604081905261002e91610043565b336080526001600160a01b031660a052610070565b5f60208284031215610053575f5ffd5b81516001600160a01b0381168114610069575f5ffd5b9392505050565b60805160a0516109b76100bb5f395f818161016b015281816104e80152818161057801526105f501525f818161024d015281816103c20152818161040901526104b901526109b75ff3fe6080604052600436106100ef575f3560e01c8063730575f211610087578063bf7b69ee11610057578063bf7b69ee146102ad578063ea62aa63146102c0578063fe395a95146102d6578063feca2202146102f0575f5ffd5b8063730575f21461020f57806387416e0f146102295780638da5cb5b1461023c578063add89bb21461026f575f5ffd5b8063441a3e70116100c2578063441a3e70146101a55780635645fd61146101c65780635b836b5f146101dd5780635cb1a20f146101fc575f5ffd5b80630611acbd146100f35780631b6dfb7914610125578063322b1cc51461013b5780633e413bee1461015a575b5f5ffd5b3480156100fe575f5ffd5b5061011261010d366004610847565b61030a565b6040519081526020015b60405180910390f35b348015610130575f5ffd5b506101126231975081565b348015610146575f5ffd5b50610112610155366004610847565b61035b565b348015610165575f5ffd5b5061018d7f000000000000000000000000000000000000000000000000000000000000000081565b6040516001600160a01b03909116815260200161011c565b3480156101b0575f5ffd5b506101c46101bf366004610867565b6103b7565b005b3480156101d1575f5ffd5b506101126301efe92081565b3480156101e8575f5ffd5b506101c46101f7366004610887565b610576565b6101c461020a366004610887565b6106d3565b34801561021a575f5ffd5b5061011266038d7ea4c6800081565b6101c46102373660046108c7565b6106de565b348015610247575f5ffd5b5061018d7f000000000000000000000000000000000000000000000000000000000000000081565b34801561027a575f5ffd5b5061029d610289366004610900565b5f6020819052908152604090205460ff1681565b604051901515815260200161011c565b6101c46102bb366004610917565b6106ee565b3480156102cb575f5ffd5b5061011262632ea081565b3480156102e1575f5ffd5b50610112662386f26fc1000081565b3480156102fb575f5ffd5b5061011266071afd498d000081565b5f8082600281111561031e5761031e610930565b0361032d575062319750919050565b600182600281111561034157610341610930565b03610350575062632ea0919050565b506301efe920919050565b5f8082600281111561036f5761036f610930565b03610382575066038d7ea4c68000919050565b600182600281111561039657610396610930565b036103a9575066071afd498d0000919050565b50662386f26fc10000919050565b336001600160a01b037f00000000000000000000000000000000000000000000000000000000000000001614610400576040516330cd747160e01b815260040160405180910390fd5b8115610498575f7f00000000000000000000000000000000000000000000000000000000000000006001600160a01b0316836040515f6040518083038185875af1925050503d805f811461046f576040519150601f19603f3d011682016040523d82523d5f602084013e610474565b606091505b5050905080610496576040516312171d8360e31b815260040160405180910390fd5b505b5f81118015610554575060405163a9059cbb60e01b81526001600160a01b037f000000000000000000000000000000000000000000000000000000000000000081166004830152602482018390527f0000000000000000000000000000000000000000000000000000000000000000169063a9059cbb906044016020604051808303815f875af115801561052e573d5f5f3e3d5ffd5b505050506040513d601f19601f820116820180604052508101906105529190610944565b155b156105725760405163022e258160e11b815260040160405180910390fd5b5050565b7f00000000000000000000000000000000000000000000000000000000000000006001600160a01b03166105bd576040516311ab4d2960e31b815260040160405180910390fd5b6105c682610756565b5f6105d08261030a565b6040516323b872dd60e01b8152336004820152306024820152604481018290529091507f00000000000000000000000000000000000000000000000000000000000000006001600160a01b0316906323b872dd906064016020604051808303815f875af1158015610643573d5f5f3e3d5ffd5b505050506040513d601f19601f820116820180604052508101906106679190610944565b6106845760405163022e258160e11b815260040160405180910390fd5b6001336001600160a01b0316847fcb1b54e96d0d97a4e1b435c3dcbf903c2ec6f579b97981ef0cdc838cdff690a484865f426040516106c69493929190610963565b60405180910390a4505050565b61057282825f6107a7565b6106e98383836107a7565b505050565b345f0361070e57604051630a078be960e31b815260040160405180910390fd5b6040805134815242602082015233916001600160a01b038416917fb4b7f3a9d727d0ac344f696304df335d2936ce3b0a58d52600c692632c9fa725910160405180910390a350565b5f8181526020819052604090205460ff161561078d57604051637a5bb50760e11b8152600481018290526024015b60405180910390fd5b5f908152602081905260409020805460ff19166001179055565b5f6107b18361035b565b90508034146107dc5760405163312b003360e01b815260048101829052346024820152604401610784565b6107e584610756565b5f336001600160a01b0316857fcb1b54e96d0d97a4e1b435c3dcbf903c2ec6f579b97981ef0cdc838cdff690a4348787426040516108269493929190610963565b60405180910390a450505050565b803560038110610842575f5ffd5b919050565b5f60208284031215610857575f5ffd5b61086082610834565b9392505050565b5f5f60408385031215610878575f5ffd5b50508035926020909101359150565b5f5f60408385031215610898575f5ffd5b823591506108a860208401610834565b90509250929050565b80356001600160a01b0381168114610842575f5ffd5b5f5f5f606084860312156108d9575f5ffd5b833592506108e960208501610834565b91506108f7604085016108b1565b90509250925092565b5f60208284031215610910575f5ffd5b5035919050565b5f60208284031215610927575f5ffd5b610860826108b1565b634e487b7160e01b5f52602160045260245ffd5b5f60208284031215610954575f5ffd5b81518015158114610860575f5ffd5b848152608081016003851061098657634e487b7160e01b5f52602160045260245ffd5b60208201949094526001600160a01b0392909216604083015260609091015291905056fea164736f6c6343000825000a",
}

// PaymentLedger is an auto generated Go binding around an Ethereum contract.
type PaymentLedger struct {
	abi abi.ABI
}

// GetABI returns the ABI associated with this contract binding.
func (c *PaymentLedger) GetABI() abi.ABI {
	return c.abi
}

// NewPaymentLedger creates a new instance of PaymentLedger.
func NewPaymentLedger() *PaymentLedger {
	parsed, err := PaymentLedgerMetaData.ParseABI()
	if err != nil {
		panic(errors.New("invalid ABI: " + err.Error()))
	}
	return &PaymentLedger{abi: *parsed}
}

// Instance creates a wrapper for a deployed contract instance at the given address.
// Use this to create the instance object passed to abigen v2 library functions Call, Transact, etc.
func (c *PaymentLedger) Instance(backend bind.ContractBackend, addr common.Address) *bind.BoundContract {
	return bind.NewBoundContract(addr, c.abi, backend, backend, backend)
}

// PackConstructor is the Go binding used to pack the parameters required for
// contract deployment.
//
// Solidity: constructor(address usdcToken) returns()
func (paymentLedger *PaymentLedger) PackConstructor(usdcToken common.Address) []byte {
	enc, err := paymentLedger.abi.Pack("", usdcToken)
	if err != nil {
		panic(err)
	}
	return enc
}

// PackEXPRESSPRICEUSDC is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xea62aa63.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function EXPRESS_PRICE_USDC() view returns(uint256)
func (paymentLedger *PaymentLedger) PackEXPRESSPRICEUSDC() []byte {
	enc, err := paymentLedger.abi.Pack("EXPRESS_PRICE_USDC")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackEXPRESSPRICEUSDC is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xea62aa63.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function EXPRESS_PRICE_USDC() view returns(uint256)
func (paymentLedger *PaymentLedger) TryPackEXPRESSPRICEUSDC() ([]byte, error) {
	return paymentLedger.abi.Pack("EXPRESS_PRICE_USDC")
}

// UnpackEXPRESSPRICEUSDC is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xea62aa63.
//
// Solidity: function EXPRESS_PRICE_USDC() view returns(uint256)
func (paymentLedger *PaymentLedger) UnpackEXPRESSPRICEUSDC(data []byte) (*big.Int, error) {
	out, err := paymentLedger.abi.Unpack("EXPRESS_PRICE_USDC", data)
	if err != nil {
		return new(big.Int), err
	}
	out0 := abi.ConvertType(out[0], new(big.Int)).(*big.Int)
	return out0, nil
}

// PackEXPRESSPRICEWEI is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xfeca2202.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function EXPRESS_PRICE_WEI() view returns(uint256)
func (paymentLedger *PaymentLedger) PackEXPRESSPRICEWEI() []byte {
	enc, err := paymentLedger.abi.Pack("EXPRESS_PRICE_WEI")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackEXPRESSPRICEWEI is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xfeca2202.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function EXPRESS_PRICE_WEI() view returns(uint256)
func (paymentLedger *PaymentLedger) TryPackEXPRESSPRICEWEI() ([]byte, error) {
	return paymentLedger.abi.Pack("EXPRESS_PRICE_WEI")
}

// UnpackEXPRESSPRICEWEI is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xfeca2202.
//
// Solidity: function EXPRESS_PRICE_WEI() view returns(uint256)
func (paymentLedger *PaymentLedger) UnpackEXPRESSPRICEWEI(data []byte) (*big.Int, error) {
	out, err := paymentLedger.abi.Unpack("EXPRESS_PRICE_WEI", data)
	if err != nil {
		return new(big.Int), err
	}
	out0 := abi.ConvertType(out[0], new(big.Int)).(*big.Int)
	return out0, nil
}

// PackPRIORITYPRICEUSDC is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x5645fd61.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function PRIORITY_PRICE_USDC() view returns(uint256)
func (paymentLedger *PaymentLedger) PackPRIORITYPRICEUSDC() []byte {
	enc, err := paymentLedger.abi.Pack("PRIORITY_PRICE_USDC")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackPRIORITYPRICEUSDC is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x5645fd61.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function PRIORITY_PRICE_USDC() view returns(uint256)
func (paymentLedger *PaymentLedger) TryPackPRIORITYPRICEUSDC() ([]byte, error) {
	return paymentLedger.abi.Pack("PRIORITY_PRICE_USDC")
}

// UnpackPRIORITYPRICEUSDC is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x5645fd61.
//
// Solidity: function PRIORITY_PRICE_USDC() view returns(uint256)
func (paymentLedger *PaymentLedger) UnpackPRIORITYPRICEUSDC(data []byte) (*big.Int, error) {
	out, err := paymentLedger.abi.Unpack("PRIORITY_PRICE_USDC", data)
	if err != nil {
		return new(big.Int), err
	}
	out0 := abi.ConvertType(out[0], new(big.Int)).(*big.Int)
	return out0, nil
}

// PackPRIORITYPRICEWEI is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xfe395a95.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function PRIORITY_PRICE_WEI() view returns(uint256)
func (paymentLedger *PaymentLedger) PackPRIORITYPRICEWEI() []byte {
	enc, err := paymentLedger.abi.Pack("PRIORITY_PRICE_WEI")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackPRIORITYPRICEWEI is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xfe395a95.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function PRIORITY_PRICE_WEI() view returns(uint256)
func (paymentLedger *PaymentLedger) TryPackPRIORITYPRICEWEI() ([]byte, error) {
	return paymentLedger.abi.Pack("PRIORITY_PRICE_WEI")
}

// UnpackPRIORITYPRICEWEI is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xfe395a95.
//
// Solidity: function PRIORITY_PRICE_WEI() view returns(uint256)
func (paymentLedger *PaymentLedger) UnpackPRIORITYPRICEWEI(data []byte) (*big.Int, error) {
	out, err := paymentLedger.abi.Unpack("PRIORITY_PRICE_WEI", data)
	if err != nil {
		return new(big.Int), err
	}
	out0 := abi.ConvertType(out[0], new(big.Int)).(*big.Int)
	return out0, nil
}

// PackSTANDARDPRICEUSDC is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x1b6dfb79.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function STANDARD_PRICE_USDC() view returns(uint256)
func (paymentLedger *PaymentLedger) PackSTANDARDPRICEUSDC() []byte {
	enc, err := paymentLedger.abi.Pack("STANDARD_PRICE_USDC")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackSTANDARDPRICEUSDC is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x1b6dfb79.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function STANDARD_PRICE_USDC() view returns(uint256)
func (paymentLedger *PaymentLedger) TryPackSTANDARDPRICEUSDC() ([]byte, error) {
	return paymentLedger.abi.Pack("STANDARD_PRICE_USDC")
}

// UnpackSTANDARDPRICEUSDC is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x1b6dfb79.
//
// Solidity: function STANDARD_PRICE_USDC() view returns(uint256)
func (paymentLedger *PaymentLedger) UnpackSTANDARDPRICEUSDC(data []byte) (*big.Int, error) {
	out, err := paymentLedger.abi.Unpack("STANDARD_PRICE_USDC", data)
	if err != nil {
		return new(big.Int), err
	}
	out0 := abi.ConvertType(out[0], new(big.Int)).(*big.Int)
	return out0, nil
}

// PackSTANDARDPRICEWEI is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x730575f2.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function STANDARD_PRICE_WEI() view returns(uint256)
func (paymentLedger *PaymentLedger) PackSTANDARDPRICEWEI() []byte {
	enc, err := paymentLedger.abi.Pack("STANDARD_PRICE_WEI")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackSTANDARDPRICEWEI is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x730575f2.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function STANDARD_PRICE_WEI() view returns(uint256)
func (paymentLedger *PaymentLedger) TryPackSTANDARDPRICEWEI() ([]byte, error) {
	return paymentLedger.abi.Pack("STANDARD_PRICE_WEI")
}

// UnpackSTANDARDPRICEWEI is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x730575f2.
//
// Solidity: function STANDARD_PRICE_WEI() view returns(uint256)
func (paymentLedger *PaymentLedger) UnpackSTANDARDPRICEWEI(data []byte) (*big.Int, error) {
	out, err := paymentLedger.abi.Unpack("STANDARD_PRICE_WEI", data)
	if err != nil {
		return new(big.Int), err
	}
	out0 := abi.ConvertType(out[0], new(big.Int)).(*big.Int)
	return out0, nil
}

// PackOwner is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x8da5cb5b.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function owner() view returns(address)
func (paymentLedger *PaymentLedger) PackOwner() []byte {
	enc, err := paymentLedger.abi.Pack("owner")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackOwner is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x8da5cb5b.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function owner() view returns(address)
func (paymentLedger *PaymentLedger) TryPackOwner() ([]byte, error) {
	return paymentLedger.abi.Pack("owner")
}

// UnpackOwner is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x8da5cb5b.
//
// Solidity: function owner() view returns(address)
func (paymentLedger *PaymentLedger) UnpackOwner(data []byte) (common.Address, error) {
	out, err := paymentLedger.abi.Unpack("owner", data)
	if err != nil {
		return *new(common.Address), err
	}
	out0 := *abi.ConvertType(out[0], new(common.Address)).(*common.Address)
	return out0, nil
}

// PackPaid is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xadd89bb2.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function paid(bytes32 ) view returns(bool)
func (paymentLedger *PaymentLedger) PackPaid(arg0 [32]byte) []byte {
	enc, err := paymentLedger.abi.Pack("paid", arg0)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackPaid is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xadd89bb2.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function paid(bytes32 ) view returns(bool)
func (paymentLedger *PaymentLedger) TryPackPaid(arg0 [32]byte) ([]byte, error) {
	return paymentLedger.abi.Pack("paid", arg0)
}

// UnpackPaid is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0xadd89bb2.
//
// Solidity: function paid(bytes32 ) view returns(bool)
func (paymentLedger *PaymentLedger) UnpackPaid(data []byte) (bool, error) {
	out, err := paymentLedger.abi.Unpack("paid", data)
	if err != nil {
		return *new(bool), err
	}
	out0 := *abi.ConvertType(out[0], new(bool)).(*bool)
	return out0, nil
}

// PackPayDebt is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xbf7b69ee.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function payDebt(address wallet) payable returns()
func (paymentLedger *PaymentLedger) PackPayDebt(wallet common.Address) []byte {
	enc, err := paymentLedger.abi.Pack("payDebt", wallet)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackPayDebt is the Go binding used to pack the parameters required for calling
// the contract method with ID 0xbf7b69ee.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function payDebt(address wallet) payable returns()
func (paymentLedger *PaymentLedger) TryPackPayDebt(wallet common.Address) ([]byte, error) {
	return paymentLedger.abi.Pack("payDebt", wallet)
}

// PackPayForProposal is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x5cb1a20f.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function payForProposal(bytes32 proposalId, uint8 tier) payable returns()
func (paymentLedger *PaymentLedger) PackPayForProposal(proposalId [32]byte, tier uint8) []byte {
	enc, err := paymentLedger.abi.Pack("payForProposal", proposalId, tier)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackPayForProposal is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x5cb1a20f.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function payForProposal(bytes32 proposalId, uint8 tier) payable returns()
func (paymentLedger *PaymentLedger) TryPackPayForProposal(proposalId [32]byte, tier uint8) ([]byte, error) {
	return paymentLedger.abi.Pack("payForProposal", proposalId, tier)
}

// PackPayForProposalPreferring is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x87416e0f.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function payForProposalPreferring(bytes32 proposalId, uint8 tier, address preferredValidator) payable returns()
func (paymentLedger *PaymentLedger) PackPayForProposalPreferring(proposalId [32]byte, tier uint8, preferredValidator common.Address) []byte {
	enc, err := paymentLedger.abi.Pack("payForProposalPreferring", proposalId, tier, preferredValidator)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackPayForProposalPreferring is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x87416e0f.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function payForProposalPreferring(bytes32 proposalId, uint8 tier, address preferredValidator) payable returns()
func (paymentLedger *PaymentLedger) TryPackPayForProposalPreferring(proposalId [32]byte, tier uint8, preferredValidator common.Address) ([]byte, error) {
	return paymentLedger.abi.Pack("payForProposalPreferring", proposalId, tier, preferredValidator)
}

// PackPayForProposalWithToken is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x5b836b5f.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function payForProposalWithToken(bytes32 proposalId, uint8 tier) returns()
func (paymentLedger *PaymentLedger) PackPayForProposalWithToken(proposalId [32]byte, tier uint8) []byte {
	enc, err := paymentLedger.abi.Pack("payForProposalWithToken", proposalId, tier)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackPayForProposalWithToken is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x5b836b5f.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function payForProposalWithToken(bytes32 proposalId, uint8 tier) returns()
func (paymentLedger *PaymentLedger) TryPackPayForProposalWithToken(proposalId [32]byte, tier uint8) ([]byte, error) {
	return paymentLedger.abi.Pack("payForProposalWithToken", proposalId, tier)
}

// PackPriceUsdc is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x0611acbd.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function priceUsdc(uint8 tier) pure returns(uint256)
func (paymentLedger *PaymentLedger) PackPriceUsdc(tier uint8) []byte {
	enc, err := paymentLedger.abi.Pack("priceUsdc", tier)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackPriceUsdc is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x0611acbd.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function priceUsdc(uint8 tier) pure returns(uint256)
func (paymentLedger *PaymentLedger) TryPackPriceUsdc(tier uint8) ([]byte, error) {
	return paymentLedger.abi.Pack("priceUsdc", tier)
}

// UnpackPriceUsdc is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x0611acbd.
//
// Solidity: function priceUsdc(uint8 tier) pure returns(uint256)
func (paymentLedger *PaymentLedger) UnpackPriceUsdc(data []byte) (*big.Int, error) {
	out, err := paymentLedger.abi.Unpack("priceUsdc", data)
	if err != nil {
		return new(big.Int), err
	}
	out0 := abi.ConvertType(out[0], new(big.Int)).(*big.Int)
	return out0, nil
}

// PackPriceWei is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x322b1cc5.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function priceWei(uint8 tier) pure returns(uint256)
func (paymentLedger *PaymentLedger) PackPriceWei(tier uint8) []byte {
	enc, err := paymentLedger.abi.Pack("priceWei", tier)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackPriceWei is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x322b1cc5.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function priceWei(uint8 tier) pure returns(uint256)
func (paymentLedger *PaymentLedger) TryPackPriceWei(tier uint8) ([]byte, error) {
	return paymentLedger.abi.Pack("priceWei", tier)
}

// UnpackPriceWei is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x322b1cc5.
//
// Solidity: function priceWei(uint8 tier) pure returns(uint256)
func (paymentLedger *PaymentLedger) UnpackPriceWei(data []byte) (*big.Int, error) {
	out, err := paymentLedger.abi.Unpack("priceWei", data)
	if err != nil {
		return new(big.Int), err
	}
	out0 := abi.ConvertType(out[0], new(big.Int)).(*big.Int)
	return out0, nil
}

// PackUsdc is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x3e413bee.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function usdc() view returns(address)
func (paymentLedger *PaymentLedger) PackUsdc() []byte {
	enc, err := paymentLedger.abi.Pack("usdc")
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackUsdc is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x3e413bee.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function usdc() view returns(address)
func (paymentLedger *PaymentLedger) TryPackUsdc() ([]byte, error) {
	return paymentLedger.abi.Pack("usdc")
}

// UnpackUsdc is the Go binding that unpacks the parameters returned
// from invoking the contract method with ID 0x3e413bee.
//
// Solidity: function usdc() view returns(address)
func (paymentLedger *PaymentLedger) UnpackUsdc(data []byte) (common.Address, error) {
	out, err := paymentLedger.abi.Unpack("usdc", data)
	if err != nil {
		return *new(common.Address), err
	}
	out0 := *abi.ConvertType(out[0], new(common.Address)).(*common.Address)
	return out0, nil
}

// PackWithdraw is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x441a3e70.  This method will panic if any
// invalid/nil inputs are passed.
//
// Solidity: function withdraw(uint256 weiAmount, uint256 usdcAmount) returns()
func (paymentLedger *PaymentLedger) PackWithdraw(weiAmount *big.Int, usdcAmount *big.Int) []byte {
	enc, err := paymentLedger.abi.Pack("withdraw", weiAmount, usdcAmount)
	if err != nil {
		panic(err)
	}
	return enc
}

// TryPackWithdraw is the Go binding used to pack the parameters required for calling
// the contract method with ID 0x441a3e70.  This method will return an error
// if any inputs are invalid/nil.
//
// Solidity: function withdraw(uint256 weiAmount, uint256 usdcAmount) returns()
func (paymentLedger *PaymentLedger) TryPackWithdraw(weiAmount *big.Int, usdcAmount *big.Int) ([]byte, error) {
	return paymentLedger.abi.Pack("withdraw", weiAmount, usdcAmount)
}

// PaymentLedgerDebtPaid represents a DebtPaid event raised by the PaymentLedger contract.
type PaymentLedgerDebtPaid struct {
	Wallet    common.Address
	Payer     common.Address
	Amount    *big.Int
	Timestamp *big.Int
	Raw       *types.Log // Blockchain specific contextual infos
}

const PaymentLedgerDebtPaidEventName = "DebtPaid"

// ContractEventName returns the user-defined event name.
func (PaymentLedgerDebtPaid) ContractEventName() string {
	return PaymentLedgerDebtPaidEventName
}

// UnpackDebtPaidEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event DebtPaid(address indexed wallet, address indexed payer, uint256 amount, uint256 timestamp)
func (paymentLedger *PaymentLedger) UnpackDebtPaidEvent(log *types.Log) (*PaymentLedgerDebtPaid, error) {
	event := "DebtPaid"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != paymentLedger.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(PaymentLedgerDebtPaid)
	if len(log.Data) > 0 {
		if err := paymentLedger.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range paymentLedger.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// PaymentLedgerProposalPaid represents a ProposalPaid event raised by the PaymentLedger contract.
type PaymentLedgerProposalPaid struct {
	ProposalId         [32]byte
	Payer              common.Address
	Amount             *big.Int
	Tier               uint8
	PaymentToken       uint8
	PreferredValidator common.Address
	Timestamp          *big.Int
	Raw                *types.Log // Blockchain specific contextual infos
}

const PaymentLedgerProposalPaidEventName = "ProposalPaid"

// ContractEventName returns the user-defined event name.
func (PaymentLedgerProposalPaid) ContractEventName() string {
	return PaymentLedgerProposalPaidEventName
}

// UnpackProposalPaidEvent is the Go binding that unpacks the event data emitted
// by contract.
//
// Solidity: event ProposalPaid(bytes32 indexed proposalId, address indexed payer, uint256 amount, uint8 tier, uint8 indexed paymentToken, address preferredValidator, uint256 timestamp)
func (paymentLedger *PaymentLedger) UnpackProposalPaidEvent(log *types.Log) (*PaymentLedgerProposalPaid, error) {
	event := "ProposalPaid"
	if len(log.Topics) == 0 {
		return nil, bind.ErrNoEventSignature
	}
	if log.Topics[0] != paymentLedger.abi.Events[event].ID {
		return nil, bind.ErrEventSignatureMismatch
	}
	out := new(PaymentLedgerProposalPaid)
	if len(log.Data) > 0 {
		if err := paymentLedger.abi.UnpackIntoInterface(out, event, log.Data); err != nil {
			return nil, err
		}
	}
	var indexed abi.Arguments
	for _, arg := range paymentLedger.abi.Events[event].Inputs {
		if arg.Indexed {
			indexed = append(indexed, arg)
		}
	}
	if err := abi.ParseTopics(out, indexed, log.Topics[1:]); err != nil {
		return nil, err
	}
	out.Raw = log
	return out, nil
}

// UnpackError attempts to decode the provided error data using user-defined
// error definitions.
func (paymentLedger *PaymentLedger) UnpackError(raw []byte) (any, error) {
	if bytes.Equal(raw[:4], paymentLedger.abi.Errors["AlreadyPaid"].ID.Bytes()[:4]) {
		return paymentLedger.UnpackAlreadyPaidError(raw[4:])
	}
	if bytes.Equal(raw[:4], paymentLedger.abi.Errors["NotOwner"].ID.Bytes()[:4]) {
		return paymentLedger.UnpackNotOwnerError(raw[4:])
	}
	if bytes.Equal(raw[:4], paymentLedger.abi.Errors["StablecoinDisabled"].ID.Bytes()[:4]) {
		return paymentLedger.UnpackStablecoinDisabledError(raw[4:])
	}
	if bytes.Equal(raw[:4], paymentLedger.abi.Errors["TokenTransferFailed"].ID.Bytes()[:4]) {
		return paymentLedger.UnpackTokenTransferFailedError(raw[4:])
	}
	if bytes.Equal(raw[:4], paymentLedger.abi.Errors["TransferFailed"].ID.Bytes()[:4]) {
		return paymentLedger.UnpackTransferFailedError(raw[4:])
	}
	if bytes.Equal(raw[:4], paymentLedger.abi.Errors["WrongAmount"].ID.Bytes()[:4]) {
		return paymentLedger.UnpackWrongAmountError(raw[4:])
	}
	if bytes.Equal(raw[:4], paymentLedger.abi.Errors["ZeroDebtPayment"].ID.Bytes()[:4]) {
		return paymentLedger.UnpackZeroDebtPaymentError(raw[4:])
	}
	return nil, errors.New("Unknown error")
}

// PaymentLedgerAlreadyPaid represents a AlreadyPaid error raised by the PaymentLedger contract.
type PaymentLedgerAlreadyPaid struct {
	ProposalId [32]byte
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error AlreadyPaid(bytes32 proposalId)
func PaymentLedgerAlreadyPaidErrorID() common.Hash {
	return common.HexToHash("0xf4b76a0e190620c3521e4dfff16272055d2f85fe92a49677762cbf7ede84fc06")
}

// UnpackAlreadyPaidError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error AlreadyPaid(bytes32 proposalId)
func (paymentLedger *PaymentLedger) UnpackAlreadyPaidError(raw []byte) (*PaymentLedgerAlreadyPaid, error) {
	out := new(PaymentLedgerAlreadyPaid)
	if err := paymentLedger.abi.UnpackIntoInterface(out, "AlreadyPaid", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// PaymentLedgerNotOwner represents a NotOwner error raised by the PaymentLedger contract.
type PaymentLedgerNotOwner struct {
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error NotOwner()
func PaymentLedgerNotOwnerErrorID() common.Hash {
	return common.HexToHash("0x30cd74712f59d478562d48e2d35de830db72c60a63dd08ae59199eec990b5bc4")
}

// UnpackNotOwnerError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error NotOwner()
func (paymentLedger *PaymentLedger) UnpackNotOwnerError(raw []byte) (*PaymentLedgerNotOwner, error) {
	out := new(PaymentLedgerNotOwner)
	if err := paymentLedger.abi.UnpackIntoInterface(out, "NotOwner", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// PaymentLedgerStablecoinDisabled represents a StablecoinDisabled error raised by the PaymentLedger contract.
type PaymentLedgerStablecoinDisabled struct {
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error StablecoinDisabled()
func PaymentLedgerStablecoinDisabledErrorID() common.Hash {
	return common.HexToHash("0x8d5a6948b4d5b5d1d563f9b71c8fc60ffd7cacce7552f3601e35d7a8ed7b141e")
}

// UnpackStablecoinDisabledError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error StablecoinDisabled()
func (paymentLedger *PaymentLedger) UnpackStablecoinDisabledError(raw []byte) (*PaymentLedgerStablecoinDisabled, error) {
	out := new(PaymentLedgerStablecoinDisabled)
	if err := paymentLedger.abi.UnpackIntoInterface(out, "StablecoinDisabled", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// PaymentLedgerTokenTransferFailed represents a TokenTransferFailed error raised by the PaymentLedger contract.
type PaymentLedgerTokenTransferFailed struct {
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error TokenTransferFailed()
func PaymentLedgerTokenTransferFailedErrorID() common.Hash {
	return common.HexToHash("0x045c4b02bfd1d72e80013ca423cc4ad578d2b3a61cfe3a46410880647bff4f57")
}

// UnpackTokenTransferFailedError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error TokenTransferFailed()
func (paymentLedger *PaymentLedger) UnpackTokenTransferFailedError(raw []byte) (*PaymentLedgerTokenTransferFailed, error) {
	out := new(PaymentLedgerTokenTransferFailed)
	if err := paymentLedger.abi.UnpackIntoInterface(out, "TokenTransferFailed", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// PaymentLedgerTransferFailed represents a TransferFailed error raised by the PaymentLedger contract.
type PaymentLedgerTransferFailed struct {
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error TransferFailed()
func PaymentLedgerTransferFailedErrorID() common.Hash {
	return common.HexToHash("0x90b8ec1877afffd816d05d9b13947f3ff18ec5851c38bad15ec2b710f92391b1")
}

// UnpackTransferFailedError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error TransferFailed()
func (paymentLedger *PaymentLedger) UnpackTransferFailedError(raw []byte) (*PaymentLedgerTransferFailed, error) {
	out := new(PaymentLedgerTransferFailed)
	if err := paymentLedger.abi.UnpackIntoInterface(out, "TransferFailed", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// PaymentLedgerWrongAmount represents a WrongAmount error raised by the PaymentLedger contract.
type PaymentLedgerWrongAmount struct {
	Expected *big.Int
	Sent     *big.Int
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error WrongAmount(uint256 expected, uint256 sent)
func PaymentLedgerWrongAmountErrorID() common.Hash {
	return common.HexToHash("0x312b00334db1ea2e47ca02471f2084ea5861925ada5b716a536b2b60e824c081")
}

// UnpackWrongAmountError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error WrongAmount(uint256 expected, uint256 sent)
func (paymentLedger *PaymentLedger) UnpackWrongAmountError(raw []byte) (*PaymentLedgerWrongAmount, error) {
	out := new(PaymentLedgerWrongAmount)
	if err := paymentLedger.abi.UnpackIntoInterface(out, "WrongAmount", raw); err != nil {
		return nil, err
	}
	return out, nil
}

// PaymentLedgerZeroDebtPayment represents a ZeroDebtPayment error raised by the PaymentLedger contract.
type PaymentLedgerZeroDebtPayment struct {
}

// ErrorID returns the hash of canonical representation of the error's signature.
//
// Solidity: error ZeroDebtPayment()
func PaymentLedgerZeroDebtPaymentErrorID() common.Hash {
	return common.HexToHash("0x503c5f48b01be5b8e14a8215e62ae17f3fc3615c3d3f2a0741858dff84d447f6")
}

// UnpackZeroDebtPaymentError is the Go binding used to decode the provided
// error data into the corresponding Go error struct.
//
// Solidity: error ZeroDebtPayment()
func (paymentLedger *PaymentLedger) UnpackZeroDebtPaymentError(raw []byte) (*PaymentLedgerZeroDebtPayment, error) {
	out := new(PaymentLedgerZeroDebtPayment)
	if err := paymentLedger.abi.UnpackIntoInterface(out, "ZeroDebtPayment", raw); err != nil {
		return nil, err
	}
	return out, nil
}
