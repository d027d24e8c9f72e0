package io.github.jobq.worker;

/** Runs the jobs of one job type. */
@FunctionalInterface
public interface JobHandler {
  /**
   * Runs one job and returns its output, serialised with Gson (null for none). Throw {@link
   * JobFailedException} to choose the failure's retry; any other exception fails the job with retry.
   * The thread is interrupted when the job is cancelled.
   */
  Object handle(JobContext ctx) throws Exception;
}
