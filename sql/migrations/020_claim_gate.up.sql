-- claim_gate is the cluster's claim slots: one row per slot, 0–63. A
-- skiplocked claim (store.JobClaimSkipLocked) first locks one row below
-- its replica's --claim-slots, and holds it until its transaction ends, so
-- at most that many claims run at once across the replicas that share the
-- database; a claim that finds every slot taken waits for one (at most
-- ClaimSlotWait, then claims without one). Many replicas claiming at once
-- made the database do less work per second, not more (docs/bench.md,
-- "A claim gate"). The rows are never written: the lock is the slot.
-- On Galera a row lock is the local node's only, so each node has its own
-- slots.
CREATE TABLE claim_gate (
    slot SMALLINT UNSIGNED NOT NULL,
    PRIMARY KEY (slot)
) ENGINE=InnoDB DEFAULT CHARSET=ascii;

INSERT INTO claim_gate (slot) VALUES
    (0), (1), (2), (3), (4), (5), (6), (7), (8), (9), (10), (11), (12), (13), (14), (15),
    (16), (17), (18), (19), (20), (21), (22), (23), (24), (25), (26), (27), (28), (29), (30), (31),
    (32), (33), (34), (35), (36), (37), (38), (39), (40), (41), (42), (43), (44), (45), (46), (47),
    (48), (49), (50), (51), (52), (53), (54), (55), (56), (57), (58), (59), (60), (61), (62), (63);
