package invalid.example.wal.client;

import java.util.Objects;

/**
 * Where an entry is delivered, when not the namespace's default target.
 *
 * @param kind "cql", "cache", "kafka", "http" or "region"
 * @param settingsJson the kind's settings as a JSON object, e.g. {@code {"url": "http://svc/hook"}}
 */
public record Target(String kind, String settingsJson) {
  public Target {
    Objects.requireNonNull(kind, "kind");
    Objects.requireNonNull(settingsJson, "settingsJson");
  }

  invalid.example.wal.v1.Target toProto() {
    return invalid.example.wal.v1.Target.newBuilder()
        .setKind(kind)
        .setSettingsJson(settingsJson)
        .build();
  }
}
