package io.github.jobq.worker;

/**
 * Thrown by a handler to fail its job with this message. {@code retry=false} fails the job now;
 * otherwise it is retried with backoff while its retry budget lasts. Any other exception fails the
 * job with retry.
 */
public class JobFailedException extends Exception {
  private final boolean retry;

  public JobFailedException(String message) {
    this(message, true);
  }

  public JobFailedException(String message, boolean retry) {
    super(message);
    this.retry = retry;
  }

  public boolean retry() {
    return retry;
  }
}
