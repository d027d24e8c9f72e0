package io.github.jobq.worker;

/** An error answer of the jobq API: its HTTP status and the body's code, field and message. */
public class ApiException extends Exception {
  private final int status;
  private final String code;
  private final String field;
  private final String serverMessage;

  public ApiException(int status, String code, String field, String serverMessage) {
    super(status + " " + code + ": " + serverMessage);
    this.status = status;
    this.code = code;
    this.field = field;
    this.serverMessage = serverMessage;
  }

  /** The HTTP status, e.g. 409. */
  public int status() {
    return status;
  }

  /** The error code, e.g. {@code stale}, {@code conflict}, {@code too_large}. */
  public String code() {
    return code;
  }

  /** The field the error names, or "". */
  public String field() {
    return field;
  }

  /** The server's message, e.g. {@code output: must be at most 65536 bytes}. */
  public String serverMessage() {
    return serverMessage;
  }

  /** True for 5xx answers (503 while the database is unavailable): the same call may succeed later. */
  public boolean isRetryable() {
    return status >= 500;
  }
}
