/// The one page skeleton of every report.html (run, serve, push, plan): doctype, title, an inline stylesheet and
/// `<main>`, then the footer that says what made the page and closes it. Inline CSS and SVG only: no script, no
/// font, no network.
public enum HTMLPage {
    /// The page up to `<main>`: `css` is the run report's stylesheet unless a page brings its own.
    public static func start(title: String, css: String = HTMLReport.css) -> String {
        """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(HTMLText.escape(title))</title>
        <style>
        \(css)
        </style>
        </head>
        <body>
        <main>

        """
    }

    /// The footer (`maker`: what made the page, e.g. "fanout push (git 1a2b3c4)", written as it is) and the
    /// closing tags.
    public static func end(maker: String, histograms: Bool = true) -> String {
        let about = histograms ? " · HdrHistogram, 3 significant digits, values recorded in nanoseconds" : ""
        return "<footer>\(maker)\(about) · this page has no script and loads nothing.</footer>\n"
            + "</main>\n</body>\n</html>\n"
    }
}
