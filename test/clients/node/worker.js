// Payment worker for idempotent_pay, with node-postgres (pg).
//
// CLIENT_WORKERS async workers share one pg.Pool (size workers + 1) and pay
// CLIENT_ORDERS orders through the simulated bank of test/demo/bank.sql:
// claim (pool.query outside BEGIN: autocommit, so the claim is committed when
// it answers, before the bank is called -- inside a transaction it would be
// refused, 25001); on PROCEED charge the bank under "bizno/attempt", then "lose the
// answer" 30% of the time, else settle with that attempt; re-claim (after
// 50 ms on IN_PROGRESS) until ALREADY_SUCCEEDED.  A reconciler settles what
// is stuck in PROCESSING by asking the bank (query_and_close), inside one
// transaction per batch, since pay_stuck locks its rows FOR UPDATE SKIP LOCKED.
// A second charge is read from pay_succeed's result (SECOND_CHARGE), never
// from its warning.  At the end every order must be SUCCESS, with no payment
// charged twice by the bank's books nor by pay_succeed's results.
//
// Connection from the standard PG* environment; exit 0 on success, 1 otherwise.
// Prints: node: <orders> orders, <charges> bank charges, 0 double charges,
//         0 second charges, <orders> orders answered ALREADY_SUCCEEDED,
//         <n> payments settled by the reconciler
//
// Every query is an unnamed parameterised query: never give a query config a
// `name:` -- named prepared statements live in one server connection and break
// under PgBouncer's transaction pooling, where each transaction may get another.
// Money is passed as a string and numeric comes back as a string (pg's default).
'use strict';
const { Pool } = require('pg');

const ORDERS = Number(process.env.CLIENT_ORDERS || 200);
const WORKERS = Number(process.env.CLIENT_WORKERS || 4);
const AMOUNT = '12.34';
const DECLINE_RATE = 0.05;
const LOSE_ANSWER = 0.3;

const pool = new Pool({ max: WORKERS + 1 });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const fail = (msg) => { console.error(`node: FAILED: ${msg}`); process.exit(1); };
pool.on('error', (err) => fail(`idle connection: ${err.code} ${err.message}`));
setTimeout(() => fail('gave up after 120 s'), 120000).unref();

// One statement, retried on a serialization failure (40001) when it is a
// transaction of its own; inside an explicit transaction the caller retries
// the whole transaction.
async function q(db, text, values) {
  for (;;) {
    try {
      return await db.query(text, values);
    } catch (err) {
      if (err.code !== '40001' || db !== pool) throw err;
    }
  }
}

// Every "bizno charge" for which pay_succeed returned SECOND_CHARGE.
const secondCharges = [];

// Settle a payment; false when the answer is moot: a late answer for an old
// attempt (55000 pay_stale_attempt) or one the other side settled first
// (23514 pay_status_transition).  Anything else is thrown, and so is a
// result other than SUCCESS or SECOND_CHARGE (pay_succeed) or FAILED
// (pay_fail); a SECOND_CHARGE is counted.
async function settle(db, bizno, attempt, chargeId) {
  let result, expected;
  try {
    if (chargeId !== null) {
      result = (await q(db, "SELECT pay_succeed($1, $2, $3, jsonb_build_object('charge', $4::bigint)) AS r",
                        [bizno, chargeId, attempt, chargeId])).rows[0].r;
      expected = ['SUCCESS', 'SECOND_CHARGE'];
    } else {
      result = (await q(db, 'SELECT pay_fail($1, $2, $3) AS r', [bizno, 'not charged', attempt])).rows[0].r;
      expected = ['FAILED'];
    }
  } catch (err) {
    if ((err.code === '55000' && err.constraint === 'pay_stale_attempt') ||
        (err.code === '23514' && err.constraint === 'pay_status_transition')) return false;
    throw err;
  }
  if (!expected.includes(result)) throw new Error(`${bizno}: settling attempt ${attempt} returned ${result}`);
  if (result === 'SECOND_CHARGE') secondCharges.push(`${bizno} ${chargeId}`);   // charged twice
  return true;
}

async function payOrder(i) {
  let c = (await q(pool, 'SELECT * FROM pay_open_claim($1, $2, $3, $4)',
                   ['JS', `ORDER-${i}`, AMOUNT, 'EUR'])).rows[0];
  const bizno = c.bizno;
  while (c.action !== 'ALREADY_SUCCEEDED') {
    if (c.action === 'PROCEED') {
      const ref = `${bizno}/${c.attempt}`;
      const chargeId = (await q(pool, 'SELECT bank.charge($1, $2, $3) AS id',
                                [ref, AMOUNT, DECLINE_RATE])).rows[0].id;
      if (Math.random() >= LOSE_ANSWER) await settle(pool, bizno, c.attempt, chargeId);
    } else if (c.action === 'IN_PROGRESS') {
      await sleep(50);
    } else {
      throw new Error(`${bizno}: unexpected action ${c.action}`);
    }
    c = (await q(pool, 'SELECT * FROM pay_claim($1)', [bizno])).rows[0];
  }
  return bizno;
}

async function worker(next, biznos) {
  for (let i = next(); i <= ORDERS; i = next()) biznos.push(await payOrder(i));
}

// Settles stuck payments until the workers are done; returns how many.
async function reconciler(isDone) {
  let settled = 0;
  while (!isDone()) {
    const client = await pool.connect();
    let broken;
    try {
      await client.query('BEGIN');
      const stuck = (await client.query('SELECT bizno, attempt FROM pay_stuck($1, $2)',
                                        ['200 milliseconds', 50])).rows;
      let n = 0;
      for (const { bizno, attempt } of stuck) {
        const chargeId = (await client.query('SELECT bank.query_and_close($1) AS id',
                                             [`${bizno}/${attempt}`])).rows[0].id;
        // A savepoint, so an ignored refusal does not abort the whole batch.
        await client.query('SAVEPOINT settle');
        if (await settle(client, bizno, attempt, chargeId)) {
          n++;
          await client.query('RELEASE SAVEPOINT settle');
        } else {
          await client.query('ROLLBACK TO SAVEPOINT settle');
        }
      }
      await client.query('COMMIT');
      settled += n;
    } catch (err) {
      await client.query('ROLLBACK').catch((e) => { broken = e; });
      if (err.code !== '40001') throw err;   // 40001: retry the batch
    } finally {
      client.release(broken);
    }
    await sleep(100);
  }
  return settled;
}

async function main() {
  let nextOrder = 1, done = false;
  const biznos = [];
  const workers = Array.from({ length: WORKERS }, () => worker(() => nextOrder++, biznos));
  const [settled] = await Promise.all([
    reconciler(() => done),
    Promise.all(workers).then(() => { done = true; }),
  ]);

  for (const bizno of biznos) {
    const row = (await q(pool, 'SELECT status FROM pay_get($1)', [bizno])).rows[0];
    if (!row || row.status !== 'SUCCESS') fail(`${bizno} is ${row ? row.status : 'missing'}, not SUCCESS`);
  }
  const charges = (await q(pool, "SELECT count(*) AS n FROM bank.charges WHERE split_part(ref, '/', 1) = ANY($1)",
                           [biznos])).rows[0].n;
  const doubles = (await q(pool, "SELECT count(*) AS n FROM (SELECT split_part(ref, '/', 1) FROM bank.charges GROUP BY 1 HAVING count(*) > 1) d")).rows[0].n;
  if (biznos.length !== ORDERS) fail(`${biznos.length} of ${ORDERS} orders paid`);
  if (doubles !== '0') fail(`${doubles} double charges`);
  if (secondCharges.length !== 0) fail(`${secondCharges.length} second charges: ${secondCharges.slice(0, 5).join(', ')}`);
  console.log(`node: ${ORDERS} orders, ${charges} bank charges, 0 double charges, ` +
              `${secondCharges.length} second charges, ${biznos.length} orders answered ALREADY_SUCCEEDED, ` +
              `${settled} payments settled by the reconciler`);
  await pool.end();
  process.exit(0);
}

main().catch((err) => fail(`${err.code || ''} ${err.constraint || ''} ${err.stack}`));
