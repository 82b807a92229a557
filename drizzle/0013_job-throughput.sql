CREATE TABLE `job_throughput` (
	`minute` integer NOT NULL,
	`outcome` text NOT NULL,
	`jobs` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`minute`, `outcome`)
);
