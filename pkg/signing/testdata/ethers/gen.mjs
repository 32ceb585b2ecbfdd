// gen.mjs writes ../ethers_vectors.json: EIP-712 Proposal signatures made
// by ethers v6, the wallet library clients actually use. The Go tests read
// the JSON, so node is only needed to regenerate it:
//
//   cd pkg/signing/testdata/ethers && npm ci && node gen.mjs
//
// Everything here is fixed (keys, proposals) and ethers signs with RFC 6979
// nonces, so rerunning produces byte-identical output.
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  TypedDataEncoder,
  Wallet,
  ZeroAddress,
  ZeroHash,
  id,
  keccak256,
  toUtf8Bytes,
  verifyTypedData,
  version,
} from "ethers";

// Must match pkg/signing: same field names, types and order.
const types = {
  Proposal: [
    { name: "action", type: "string" },
    { name: "proposalId", type: "bytes32" },
    { name: "wallet", type: "address" },
    { name: "path", type: "string" },
    { name: "organization", type: "string" },
    { name: "contentType", type: "string" },
    { name: "paymentTier", type: "string" },
    { name: "messageHash", type: "bytes32" },
  ],
};

// Test-only keys; never fund them.
const keys = [
  "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318",
  "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
  "0x0000000000000000000000000000000000000000000000000000000000000001",
];

const devContract = "0x5FbDB2315678afecb367f032d93F642f64180aa3";

// chainId is a decimal string so values beyond 2^53 survive JSON in Go.
const cases = [
  {
    name: "write on dev chain",
    key: 0,
    chainId: "1337",
    verifyingContract: devContract,
    action: "write",
    proposalId: id("proposal-1"),
    path: "/acme/docs/readme.md",
    organization: "acme",
    contentType: "text/markdown",
    paymentTier: "standard",
    message: "# Hello\n\nFirst revision.\n",
  },
  {
    name: "delete on dev chain",
    key: 0,
    chainId: "1337",
    verifyingContract: devContract,
    action: "delete",
    proposalId: id("proposal-2"),
    path: "/acme/docs/readme.md",
    organization: "acme",
    contentType: "text/markdown",
    paymentTier: "express",
    message: null,
  },
  {
    name: "write without chain (zero contract)",
    key: 1,
    chainId: "1337",
    verifyingContract: ZeroAddress,
    action: "write",
    proposalId: id("proposal-3"),
    path: "/globex/data/prices.json",
    organization: "globex",
    contentType: "application/json",
    paymentTier: "priority",
    message: '{"price":"1.00","currency":"USD"}',
  },
  {
    name: "unicode fields, mainnet id",
    key: 2,
    chainId: "1",
    verifyingContract: "0xCcCCccccCCCCcCCCCCCcCcCccCcCCCcCcccccccC",
    action: "write",
    proposalId: id("proposal-4"),
    path: "/ünïcødé/日本語/файл.txt",
    organization: "ünïcødé",
    contentType: "text/plain; charset=utf-8",
    paymentTier: "standard",
    message: "Grüße, 世界 🌍",
  },
  {
    name: "empty strings, max uint64 chain id",
    key: 1,
    chainId: "18446744073709551615",
    verifyingContract: "0xffffffffffffffffffffffffffffffffffffffff",
    action: "delete",
    proposalId: ZeroHash,
    path: "",
    organization: "",
    contentType: "",
    paymentTier: "",
    message: null,
  },
];

const encoder = TypedDataEncoder.from(types);
const vectors = [];
for (const c of cases) {
  const wallet = new Wallet(keys[c.key]);
  const domain = {
    name: "ContentLedger",
    version: "1",
    chainId: BigInt(c.chainId),
    verifyingContract: c.verifyingContract,
  };
  const messageHash =
    c.message === null ? ZeroHash : keccak256(toUtf8Bytes(c.message));
  const value = {
    action: c.action,
    proposalId: c.proposalId,
    wallet: wallet.address,
    path: c.path,
    organization: c.organization,
    contentType: c.contentType,
    paymentTier: c.paymentTier,
    messageHash,
  };
  const signature = await wallet.signTypedData(domain, types, value);
  if (verifyTypedData(domain, types, value, signature) !== wallet.address) {
    throw new Error(`ethers does not verify its own signature for ${c.name}`);
  }
  vectors.push({
    name: c.name,
    privateKey: keys[c.key],
    address: wallet.address,
    domain: { ...domain, chainId: c.chainId },
    proposal: value,
    message: c.message,
    encodeType: encoder.encodeType("Proposal"),
    domainSeparator: TypedDataEncoder.hashDomain(domain),
    structHash: encoder.hash(value),
    digest: TypedDataEncoder.hash(domain, types, value),
    signature,
  });
}

const out = fileURLToPath(new URL("../ethers_vectors.json", import.meta.url));
writeFileSync(
  out,
  JSON.stringify({ generator: `ethers ${version}`, vectors }, null, 2) + "\n",
);
console.log(`wrote ${vectors.length} vectors to ${out}`);
