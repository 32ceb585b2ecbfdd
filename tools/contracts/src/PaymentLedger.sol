// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

/// @notice Minimal ERC-20 surface the ledger needs to take stablecoin payments.
interface IERC20 {
    function transferFrom(address from, address to, uint256 amount) external returns (bool);
    function transfer(address to, uint256 amount) external returns (bool);
}

/// @title PaymentLedger
/// @notice Takes payment for Content Ledger proposals. Validators follow the
/// ProposalPaid log and accept a proposal only when its payment is here, for
/// the class the proposal names. Prices are constants: changing one is a
/// redeploy, so a validator can trust a price it read once.
contract PaymentLedger {
    enum Tier { Standard, Express, Priority }
    enum PaymentToken { ETH, USDC }

    event ProposalPaid(
        bytes32 indexed proposalId,
        address indexed payer,
        uint256 amount,
        Tier tier,
        PaymentToken indexed paymentToken,
        address preferredValidator,
        uint256 timestamp
    );

    event DebtPaid(address indexed wallet, address indexed payer, uint256 amount, uint256 timestamp);

    error WrongAmount(uint256 expected, uint256 sent);
    error AlreadyPaid(bytes32 proposalId);
    error StablecoinDisabled();
    error TokenTransferFailed();
    error ZeroDebtPayment();
    error NotOwner();
    error TransferFailed();

    uint256 public constant STANDARD_PRICE_WEI = 0.001 ether;
    uint256 public constant EXPRESS_PRICE_WEI = 0.002 ether;
    uint256 public constant PRIORITY_PRICE_WEI = 0.01 ether;

    // USDC has 6 decimals.
    uint256 public constant STANDARD_PRICE_USDC = 3_250_000;
    uint256 public constant EXPRESS_PRICE_USDC = 6_500_000;
    uint256 public constant PRIORITY_PRICE_USDC = 32_500_000;

    address public immutable owner;
    IERC20 public immutable usdc;

    /// @notice proposalId => paid. A proposal id is paid for once, so a
    /// client that retries a payment cannot lose money to a double charge.
    mapping(bytes32 => bool) public paid;

    constructor(address usdcToken) {
        owner = msg.sender;
        usdc = IERC20(usdcToken);
    }

    function priceWei(Tier tier) public pure returns (uint256) {
        if (tier == Tier.Standard) return STANDARD_PRICE_WEI;
        if (tier == Tier.Express) return EXPRESS_PRICE_WEI;
        return PRIORITY_PRICE_WEI;
    }

    function priceUsdc(Tier tier) public pure returns (uint256) {
        if (tier == Tier.Standard) return STANDARD_PRICE_USDC;
        if (tier == Tier.Express) return EXPRESS_PRICE_USDC;
        return PRIORITY_PRICE_USDC;
    }

    /// @notice Pays for a proposal in ETH at exactly the class price.
    function payForProposal(bytes32 proposalId, Tier tier) external payable {
        _payEth(proposalId, tier, address(0));
    }

    /// @notice Pays in ETH and names the validator the payer would like to
    /// handle the proposal. The preference is advisory.
    function payForProposalPreferring(bytes32 proposalId, Tier tier, address preferredValidator) external payable {
        _payEth(proposalId, tier, preferredValidator);
    }

    /// @notice Pays for a proposal in USDC at exactly the class's stablecoin
    /// price. The payer approves this contract for the amount first.
    function payForProposalWithToken(bytes32 proposalId, Tier tier) external {
        if (address(usdc) == address(0)) revert StablecoinDisabled();
        _markPaid(proposalId);
        uint256 amount = priceUsdc(tier);
        if (!usdc.transferFrom(msg.sender, address(this), amount)) revert TokenTransferFailed();
        emit ProposalPaid(proposalId, msg.sender, amount, tier, PaymentToken.USDC, address(0), block.timestamp);
    }

    /// @notice Pays down the GC debt of a wallet; any positive amount.
    function payDebt(address wallet) external payable {
        if (msg.value == 0) revert ZeroDebtPayment();
        emit DebtPaid(wallet, msg.sender, msg.value, block.timestamp);
    }

    /// @notice Moves collected ETH and USDC to the owner.
    function withdraw(uint256 weiAmount, uint256 usdcAmount) external {
        if (msg.sender != owner) revert NotOwner();
        if (weiAmount > 0) {
            (bool ok,) = payable(owner).call{value: weiAmount}("");
            if (!ok) revert TransferFailed();
        }
        if (usdcAmount > 0 && !usdc.transfer(owner, usdcAmount)) revert TokenTransferFailed();
    }

    function _payEth(bytes32 proposalId, Tier tier, address preferredValidator) private {
        uint256 expected = priceWei(tier);
        if (msg.value != expected) revert WrongAmount(expected, msg.value);
        _markPaid(proposalId);
        emit ProposalPaid(proposalId, msg.sender, msg.value, tier, PaymentToken.ETH, preferredValidator, block.timestamp);
    }

    function _markPaid(bytes32 proposalId) private {
        if (paid[proposalId]) revert AlreadyPaid(proposalId);
        paid[proposalId] = true;
    }
}
