package io.github.jobq.worker;

/** A call that got no HTTP answer: refused, reset, timed out or aborted. */
public class TransportException extends Exception {
  public TransportException(String message, Throwable cause) {
    super(message, cause);
  }
}
