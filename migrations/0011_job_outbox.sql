-- job_unsent: the run's job was decided in a commit (a retry, a re-drive) but its message is not
-- known to be on the queue yet. Set in the deciding transaction, cleared once the send succeeded.
-- A send that failed after the commit leaves it set, and the sweeper sends the job again after the
-- lost-job grace, whatever the queue holds: on a busy queue the "empty queue" proof never comes.
ALTER TABLE document_processing_runs
    ADD COLUMN IF NOT EXISTS job_unsent BOOLEAN NOT NULL DEFAULT false;
