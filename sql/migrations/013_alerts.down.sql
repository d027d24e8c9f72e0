DROP TABLE alert_cursor;
DROP TABLE alert_delivery;
DROP TABLE alert_rule;
