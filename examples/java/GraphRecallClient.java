import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A minimal client for the graphrecall HTTP API: plain Java 17 ({@code java.net.http}), no third-party jars.
 *
 * <p>Requests are built with a tiny, careful JSON writer (every string is escaped); responses are returned as raw
 * JSON strings, with {@link Json} to pull out a few fields. A real application would map responses with Jackson
 * (Spring's {@code RestClient} does this for you, see docs/http-api.md).
 */
public final class GraphRecallClient {

    /** One chat turn: role is user, assistant, system or tool. */
    public record Message(String role, String content) {}

    /** A non-2xx answer, with the API's stable error code (unauthorized, forbidden, invalid_input, ...). */
    public static final class GraphRecallException extends RuntimeException {
        private static final long serialVersionUID = 1L;
        private final int status;
        private final String code;
        private final String field;

        GraphRecallException(int status, String code, String message, String field) {
            super("HTTP " + status + " " + code + ": " + message + (field == null ? "" : " (field " + field + ")"));
            this.status = status;
            this.code = code;
            this.field = field;
        }

        public int status() { return status; }
        public String code() { return code; }
        public String field() { return field; }
    }

    private final HttpClient http;
    private final String baseUrl;
    private final String apiKey;

    /** @param apiKey the bearer secret, or null for a server started with --insecure-local */
    public GraphRecallClient(String baseUrl, String apiKey) {
        this.http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
        this.baseUrl = baseUrl.endsWith("/") ? baseUrl.substring(0, baseUrl.length() - 1) : baseUrl;
        this.apiKey = apiKey;
    }

    /** POST /v1/scopes/{org}/{user}/sessions: store a whole conversation (idempotent by session and message ids). */
    public String addSession(String org, String user, String sessionId, String isoDate, List<Message> messages) {
        StringBuilder body = new StringBuilder("{\"session_id\":").append(Json.quote(sessionId));
        if (isoDate != null) {
            body.append(",\"date\":").append(Json.quote(isoDate));
        }
        body.append(",\"messages\":").append(messagesJson(messages)).append('}');
        return send("POST", scopePath(org, user) + "/sessions", body.toString());
    }

    /** POST /v1/scopes/{org}/{user}/messages: append turns to a session (created if new). */
    public String addMessages(String org, String user, String sessionId, List<Message> messages) {
        String body = "{\"session_id\":" + Json.quote(sessionId) + ",\"messages\":" + messagesJson(messages) + "}";
        return send("POST", scopePath(org, user) + "/messages", body);
    }

    /** GET /v1/scopes/{org}/{user}/search: the k best pieces of evidence for a query. */
    public String search(String org, String user, String query, int k) {
        return send("GET", scopePath(org, user) + "/search?query=" + queryParam(query) + "&k=" + k, null);
    }

    /** GET /v1/scopes/{org}/{user}/context: evidence rendered for a prompt, inside a token budget. */
    public String context(String org, String user, String query, int tokenBudget) {
        return send("GET", scopePath(org, user) + "/context?query=" + queryParam(query) + "&token_budget=" + tokenBudget,
                null);
    }

    /** GET /v1/scopes/{org}/{user}/sessions/{id}: one conversation with its messages. */
    public String getSession(String org, String user, String sessionId) {
        return send("GET", scopePath(org, user) + "/sessions/" + pathSegment(sessionId), null);
    }

    /** DELETE /v1/scopes/{org}/{user}: erase everything stored for the user. */
    public String forget(String org, String user) {
        return send("DELETE", scopePath(org, user), null);
    }

    private String send(String method, String pathAndQuery, String jsonBody) {
        HttpRequest.Builder req = HttpRequest.newBuilder(URI.create(baseUrl + pathAndQuery))
                .timeout(Duration.ofSeconds(60))
                .header("Accept", "application/json");
        if (apiKey != null) {
            req.header("Authorization", "Bearer " + apiKey);
        }
        if (jsonBody != null) {
            req.header("Content-Type", "application/json");
            req.method(method, HttpRequest.BodyPublishers.ofString(jsonBody, StandardCharsets.UTF_8));
        } else {
            req.method(method, HttpRequest.BodyPublishers.noBody());
        }
        HttpResponse<String> resp;
        try {
            resp = http.send(req.build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new IllegalStateException("graphrecall server unreachable at " + baseUrl + ": " + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
        if (resp.statusCode() / 100 != 2) {
            String raw = resp.body();
            throw new GraphRecallException(resp.statusCode(), Json.stringField(raw, "code"),
                    Json.stringField(raw, "message"), Json.stringField(raw, "field"));
        }
        return resp.body();
    }

    private static String messagesJson(List<Message> messages) {
        StringBuilder out = new StringBuilder("[");
        for (int i = 0; i < messages.size(); i++) {
            Message m = messages.get(i);
            if (i > 0) out.append(',');
            out.append("{\"role\":").append(Json.quote(m.role())).append(",\"content\":")
                    .append(Json.quote(m.content())).append('}');
        }
        return out.append(']').toString();
    }

    private static String scopePath(String org, String user) {
        return "/v1/scopes/" + pathSegment(org) + "/" + pathSegment(user);
    }

    /** Percent-encode one path segment ('/' becomes %2F; URLEncoder's '+' for space is wrong in paths). */
    static String pathSegment(String s) {
        return URLEncoder.encode(s, StandardCharsets.UTF_8).replace("+", "%20");
    }

    static String queryParam(String s) {
        return URLEncoder.encode(s, StandardCharsets.UTF_8);
    }

    /** Just enough JSON: string quoting for requests, and reading a few fields out of responses. */
    public static final class Json {
        private Json() {}

        /** A JSON string literal: quotes, backslashes and every control character escaped. */
        public static String quote(String s) {
            StringBuilder out = new StringBuilder(s.length() + 2).append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"' -> out.append("\\\"");
                    case '\\' -> out.append("\\\\");
                    case '\n' -> out.append("\\n");
                    case '\r' -> out.append("\\r");
                    case '\t' -> out.append("\\t");
                    case '\b' -> out.append("\\b");
                    case '\f' -> out.append("\\f");
                    default -> {
                        if (c < 0x20 || c == '\u2028' || c == '\u2029') {
                            out.append(String.format("\\u%04x", (int) c));
                        } else {
                            out.append(c);
                        }
                    }
                }
            }
            return out.append('"').toString();
        }

        private static Pattern stringPattern(String name) {
            return Pattern.compile("\"" + Pattern.quote(name) + "\"\\s*:\\s*\"((?:[^\"\\\\]|\\\\.)*)\"");
        }

        /** The first string value of {@code "name"} anywhere in the document, unescaped; null if absent. */
        public static String stringField(String json, String name) {
            Matcher m = stringPattern(name).matcher(json);
            return m.find() ? unescape(m.group(1)) : null;
        }

        /** Every string value of {@code "name"}, in document order. */
        public static List<String> stringFields(String json, String name) {
            List<String> out = new ArrayList<>();
            Matcher m = stringPattern(name).matcher(json);
            while (m.find()) out.add(unescape(m.group(1)));
            return out;
        }

        /** The first numeric value of {@code "name"}; null if absent. */
        public static Double numberField(String json, String name) {
            Matcher m = Pattern.compile("\"" + Pattern.quote(name) + "\"\\s*:\\s*(-?[0-9.eE+-]+)").matcher(json);
            return m.find() ? Double.valueOf(m.group(1)) : null;
        }

        static String unescape(String s) {
            StringBuilder out = new StringBuilder(s.length());
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                if (c != '\\' || i + 1 >= s.length()) {
                    out.append(c);
                    continue;
                }
                char e = s.charAt(++i);
                switch (e) {
                    case 'n' -> out.append('\n');
                    case 'r' -> out.append('\r');
                    case 't' -> out.append('\t');
                    case 'b' -> out.append('\b');
                    case 'f' -> out.append('\f');
                    case 'u' -> {
                        out.append((char) Integer.parseInt(s.substring(i + 1, i + 5), 16));
                        i += 4;
                    }
                    default -> out.append(e); // \" \\ \/
                }
            }
            return out.toString();
        }
    }
}
