-- check_stats(): pay_stats, pay_stats_transitions and pay_stats_amounts against a full count of
-- the ledger and the journal (with what pay_archive took from it, which the
-- counts go on counting: pay_archive_counts), read in the caller's
-- snapshot; 'equal', or an error naming every difference.  The counts tests and the failover test
-- create it where they compare.
CREATE OR REPLACE FUNCTION check_stats() RETURNS text LANGUAGE plpgsql AS $$
DECLARE bad text;
BEGIN
  WITH full_count AS (
      SELECT s.status,
             count(l.bizno) AS payments,
             count(l.bizno) FILTER (WHERE l.parent IS NOT NULL) AS refunds,
             CASE WHEN s.status = 'PROCESSING' THEN min(l.processing_since) END AS oldest,
             CASE WHEN s.status = 'PROCESSING' THEN count(l.bizno) FILTER (WHERE l.processing_since < now() - current_setting('idempotent_pay.stuck_after')::interval) END AS stuck
      FROM unnest(enum_range(NULL::pay_status)) AS s(status)
      LEFT JOIN pay_ledger l ON l.status = s.status GROUP BY s.status)
  SELECT string_agg(format('%s: %s/%s payments %s/%s refunds %s/%s oldest %s/%s stuck', f.status,
                           s.payments, f.payments, s.refunds, f.refunds, s.oldest_processing_since, f.oldest,
                           s.stuck, f.stuck), '; ')
  INTO bad
  FROM full_count f JOIN pay_stats s USING (status)
  WHERE s.payments <> f.payments OR s.refunds <> f.refunds
     OR s.oldest_processing_since IS DISTINCT FROM f.oldest OR s.stuck IS DISTINCT FROM f.stuck;
  IF bad IS NOT NULL THEN RAISE EXCEPTION 'pay_stats differs from a full count: %', bad; END IF;
  WITH extra AS (
      SELECT (SELECT count(*) FROM pay_journal WHERE from_status = 'FAILED' AND to_status = 'INIT') +
             (SELECT coalesce(sum(n), 0) FROM pay_archive_counts WHERE from_status = 'FAILED' AND to_status = 'INIT') AS resets,
             (SELECT count(*) FROM pay_second_charges()) +
             (SELECT coalesce(sum(n), 0) FROM pay_archive_counts WHERE second_charge IN ('reported', 'found')) AS second_charges,
             (SELECT count(*) FROM pay_second_charges() WHERE NOT confirmed) AS unconfirmed)
  SELECT format('resets %s/%s second charges %s/%s unconfirmed %s/%s', s.resets, e.resets,
                c.second_charges, e.second_charges, c.unconfirmed_second_charges, e.unconfirmed)
  INTO bad
  FROM extra e, pay_stats s, pay_stats c
  WHERE s.status = 'INIT' AND c.status = 'SUCCESS'
    AND (s.resets <> e.resets OR c.second_charges <> e.second_charges OR c.unconfirmed_second_charges <> e.unconfirmed);
  IF bad IS NOT NULL THEN RAISE EXCEPTION 'pay_stats differs from a full count: %', bad; END IF;
  SELECT string_agg(format('%s->%s: %s/%s', coalesce(a.from_status::text, coalesce(b.from_status::text, '-')),
                           coalesce(a.to_status, b.to_status), a.transitions, b.n), '; ')
  INTO bad
  FROM pay_stats_transitions a
  FULL JOIN (SELECT from_status, to_status, sum(n) AS n
             FROM (SELECT from_status, to_status, 1 AS n FROM pay_journal
                   UNION ALL
                   SELECT from_status, to_status, n FROM pay_archive_counts) AS j
             WHERE from_status IS DISTINCT FROM to_status GROUP BY 1, 2) b
    ON a.from_status IS NOT DISTINCT FROM b.from_status AND a.to_status = b.to_status
  WHERE a.transitions IS DISTINCT FROM b.n;
  IF bad IS NOT NULL THEN RAISE EXCEPTION 'pay_stats_transitions differs from the journal: %', bad; END IF;
  -- the card flow's rows by kind, and its amounts (the archive's included)
  WITH full_count AS (
      SELECT s.status,
             count(l.bizno) FILTER (WHERE l.kind = 'AUTHORIZATION') AS authorizations,
             count(l.bizno) FILTER (WHERE l.kind IN ('CAPTURE', 'FINAL_CAPTURE')) AS captures,
             count(l.bizno) FILTER (WHERE l.kind = 'VOID') AS voids,
             count(l.bizno) FILTER (WHERE l.kind = 'INCREMENT') AS increments
      FROM unnest(enum_range(NULL::pay_status)) AS s(status)
      LEFT JOIN pay_ledger l ON l.status = s.status GROUP BY s.status)
  SELECT string_agg(format('%s: %s/%s authorizations %s/%s captures %s/%s voids %s/%s increments', f.status,
                           s.authorizations, f.authorizations, s.captures, f.captures, s.voids, f.voids,
                           s.increments, f.increments), '; ')
  INTO bad
  FROM full_count f JOIN pay_stats s USING (status)
  WHERE (s.authorizations, s.captures, s.voids, s.increments)
        IS DISTINCT FROM (f.authorizations, f.captures, f.voids, f.increments);
  IF bad IS NOT NULL THEN RAISE EXCEPTION 'pay_stats differs from a full count: %', bad; END IF;
  SELECT string_agg(format('%s: %s/%s authorized %s/%s captured', coalesce(a.currency, b.currency),
                           a.authorized, b.authorized, a.captured, b.captured), '; ')
  INTO bad
  FROM pay_stats_amounts a
  FULL JOIN (SELECT currency,
                    coalesce(sum(amount) FILTER (WHERE kind IN ('AUTHORIZATION', 'INCREMENT')), 0) AS authorized,
                    coalesce(sum(amount) FILTER (WHERE kind IN ('CAPTURE', 'FINAL_CAPTURE')), 0) AS captured
             FROM (SELECT j.from_status, j.to_status, l.kind, j.currency, j.amount
                   FROM pay_journal j JOIN pay_ledger l ON l.bizno = j.bizno WHERE l.kind IS NOT NULL
                   UNION ALL
                   SELECT from_status, to_status, kind, currency, amount FROM pay_archive_counts
                   WHERE kind IS NOT NULL) AS c
             WHERE to_status = 'SUCCESS' AND from_status IS DISTINCT FROM 'SUCCESS'
             GROUP BY 1) b ON a.currency = b.currency
  WHERE (a.authorized, a.captured) IS DISTINCT FROM (b.authorized, b.captured);
  IF bad IS NOT NULL THEN RAISE EXCEPTION 'pay_stats_amounts differs from the journal: %', bad; END IF;
  RETURN 'equal';
END $$;
