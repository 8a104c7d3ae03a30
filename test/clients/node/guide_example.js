// Runs doc/guide.md's node-postgres example (the block between
// "<!-- example node: begin -->" and "<!-- example node: end -->"), as
// written, against a bank that loses answers: the same run as README's Python
// example gets (test/clients/python/readme_example.py).
//
//   node guide_example.js GUIDE.md [ORDERS]
//
// The block exports pool and payOrder(pool, bank, orderId, amount).  Four
// async workers pay ORDERS orders (240 by default), every order twice at
// once, in rounds; between rounds a reconciler asks the bank about the
// payments left PROCESSING and settles them.  The bank books each charge,
// loses the answer of 30% of them (payOrder's bank.charge rejects with a
// TimeoutError), and declines the first attempt of every tenth order.
// Exit 0 only when every order is SUCCESS under the one charge the bank
// booked for it, none was charged twice, payOrder threw nothing and settled
// every charge whose answer it received.  Connection from the PG* environment.
'use strict';
const fs = require('fs');
const path = require('path');
const Module = require('module');

const guide = fs.readFileSync(process.argv[2], 'utf8');
const block = /<!-- example node: begin -->\n```js\n([\s\S]*?)```\n<!-- example node: end -->/.exec(guide);
if (!block) { console.error('the guide has no block "example node"'); process.exit(1); }
const ORDERS = Number(process.argv[3] || 240);
const LOSS = 0.3;
const ROUNDS = 5;

// the block as a module of this directory, where node_modules has pg
const filename = path.join(__dirname, 'doc-guide-example.js');
const example = new Module(filename, module);
example.filename = filename;
example.paths = Module._nodeModulePaths(__dirname);
example._compile(block[1], filename);
const { pool, payOrder } = example.exports;

// a seeded generator, so that a failure repeats
let seed = 43;
const random = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };

const bank = {
  charges: new Map(), closed: new Set(), requests: new Set(), lost: 0, declined: 0, booked: 0,
  // resolves to the charge's id, or null when declined; rejects when the answer is lost
  async book(reference) {
    const first = !this.requests.has(reference);
    this.requests.add(reference);
    const [bizno, attempt] = reference.split('/');
    const order = Number(bizno.split('-')[2]);
    await new Promise((resolve) => setImmediate(resolve));
    if (this.closed.has(reference) || (first && attempt === '1' && order % 10 === 0)) {
      this.declined++;
      return null;
    }
    const id = `CH-${++this.booked}`;
    this.charges.set(reference, [...(this.charges.get(reference) || []), id]);
    if (random() < LOSS) {
      this.lost++;
      const err = new Error(`${reference}: no answer from the bank`);
      err.name = 'TimeoutError';
      throw err;
    }
    return id;
  },
  // the bank as one call of payOrder sees it, which knows whether it answered
  forCall() {
    const call = { answered: false };
    call.charge = async (reference) => {
      const charge = await this.book(reference);
      call.answered = true;
      return charge;
    };
    return call;
  },
  queryAndClose(reference) {
    this.closed.add(reference);
    return (this.charges.get(reference) || [null])[0];
  },
};

async function reconcile() {
  const client = await pool.connect();
  let settled = 0;
  try {
    await client.query('BEGIN');            // pay_stuck's locks last until COMMIT
    const { rows } = await client.query("SELECT bizno, attempt FROM pay_stuck('0 seconds', 100000)");
    for (const { bizno, attempt } of rows) {
      const charge = bank.queryAndClose(`${bizno}/${attempt}`);
      if (charge === null) await client.query("SELECT pay_fail($1, 'no charge at the bank', $2)", [bizno, attempt]);
      else await client.query('SELECT pay_succeed($1, $2, $3)', [bizno, charge, attempt]);
      settled++;
    }
    await client.query('COMMIT');
  } finally {
    client.release();
  }
  return settled;
}

async function main() {
  const errors = [];
  const dropped = [];
  const outcomes = {};
  const paid = new Set();
  let byExample = 0;
  let byReconciler = 0;
  let calls = 0;
  let rounds = 0;
  while (paid.size < ORDERS && rounds < ROUNDS && errors.length === 0) {
    rounds++;
    const work = [];
    for (let i = 0; i < ORDERS; i++) if (!paid.has(i)) work.push(i, i);   // twice at once
    const worker = async () => {
      while (work.length > 0) {
        const i = work.shift();
        const callBank = bank.forCall();
        let result;
        try {
          result = await payOrder(pool, callBank, `ORDER-${i}`, `${10 + (i % 90)}.99`);
        } catch (err) {
          errors.push(`ORDER-${i}: ${err.code || ''} ${err.constraint || ''} ${err.message.split('\n')[0]}`);
          continue;
        }
        calls++;
        outcomes[result.outcome] = (outcomes[result.outcome] || 0) + 1;
        if (result.outcome === 'paid') paid.add(i);
        if (callBank.answered && result.outcome === 'pending') dropped.push(`ORDER-${i}`);
        if (callBank.answered && result.outcome === 'paid') byExample++;
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
    byReconciler += await reconcile();
  }

  const booked = new Map();                 // every charge of an order, under any bizNo
  for (const [reference, charges] of bank.charges) {
    const order = `ORDER-${reference.split('-')[2]}`;
    booked.set(order, [...(booked.get(order) || []), ...charges]);
  }
  const twice = [...booked.values()].filter((charges) => charges.length > 1).length;
  const wrong = [];
  for (let i = 0; i < ORDERS; i++) {
    const { rows: [row] } = await pool.query("SELECT status, channel_ref FROM pay_find('SHOP', $1)", [`ORDER-${i}`]);
    const charges = booked.get(`ORDER-${i}`) || [];
    if (!row || row.status !== 'SUCCESS' || charges.length !== 1 || charges[0] !== row.channel_ref)
      wrong.push(`ORDER-${i}: ${row && row.status} ${row && row.channel_ref}, the bank booked ${charges.join(' ')}`);
  }
  await pool.end();
  console.log(`orders ${ORDERS}, rounds ${rounds}, calls of payOrder ${calls}: ` +
              Object.keys(outcomes).sort().map((k) => `${k} ${outcomes[k]}`).join(', '));
  console.log(`bank: ${bank.booked} charges booked, ${bank.lost} answers lost, ${bank.declined} declined`);
  console.log(`payments settled by payOrder ${byExample}, by the reconciler ${byReconciler}`);
  console.log(`orders charged twice ${twice}`);
  console.log(`orders not SUCCESS under their one charge ${wrong.length}`);
  console.log(`charges answered to payOrder and left unsettled ${dropped.length}`);
  console.log(`errors thrown by payOrder ${errors.length}`);
  for (const line of [...wrong.slice(0, 5), ...dropped.slice(0, 5), ...errors.slice(0, 5)]) console.log(`  ${line}`);
  process.exit(twice === 0 && wrong.length === 0 && dropped.length === 0 && errors.length === 0 ? 0 : 1);
}

main().catch((err) => { console.error(err); process.exit(1); });
