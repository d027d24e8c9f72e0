package io.github.jobq.worker;

/**
 * Thrown by {@link JobContext#throwIfCancelled()} and {@link JobContext#sleep} once the job's work
 * must stop. A handler that lets it propagate fails the job with "canceled"; a job whose cancel was
 * requested then ends CANCELED.
 */
public class CancelledException extends JobFailedException {
  private final String reason;

  public CancelledException(String reason) {
    super("canceled", true);
    this.reason = reason;
  }

  /** Why: "cancel_requested", "lost" or "shutdown". */
  public String reason() {
    return reason;
  }
}
