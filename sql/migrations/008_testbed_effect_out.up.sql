-- job_effect is the chaos testbed's table, not the product's: the testbed
-- creates it where it runs (jobtypes.RegisterTestbed). It leaves the product
-- schema here; a testbed run recreates it at its next start.
DROP TABLE IF EXISTS job_effect;
