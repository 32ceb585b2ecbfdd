// Compiles src/*.sol with the pinned solc (package.json) and writes
// build/<Name>.abi and build/<Name>.bin. Settings are fixed here so that the
// committed bytecode is reproducible.
const fs = require('fs');
const path = require('path');
const solc = require('solc');

const srcDir = path.join(__dirname, 'src');
const outDir = path.join(__dirname, 'build');
const sources = {};
for (const f of fs.readdirSync(srcDir).filter((f) => f.endsWith('.sol')).sort()) {
  sources[f] = { content: fs.readFileSync(path.join(srcDir, f), 'utf8') };
}
const input = {
  language: 'Solidity',
  sources,
  settings: {
    evmVersion: 'cancun',
    optimizer: { enabled: true, runs: 200 },
    metadata: { bytecodeHash: 'none' },
    outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
  },
};
const out = JSON.parse(solc.compile(JSON.stringify(input)));
let failed = false;
for (const e of out.errors || []) {
  console.error(e.formattedMessage);
  if (e.severity === 'error') failed = true;
}
if (failed) process.exit(1);
fs.mkdirSync(outDir, { recursive: true });
for (const file of Object.keys(out.contracts).sort()) {
  for (const [name, c] of Object.entries(out.contracts[file])) {
    if (name === 'IERC20') continue;
    fs.writeFileSync(path.join(outDir, `${name}.abi`), JSON.stringify(c.abi, null, 2) + '\n');
    fs.writeFileSync(path.join(outDir, `${name}.bin`), c.evm.bytecode.object + '\n');
    console.log(`compiled ${name} with solc ${solc.version()}`);
  }
}
