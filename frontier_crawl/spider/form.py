"""``FormRequest.from_response``: a page's form filled in as a browser submits it.

After Scrapy 2.13's ``scrapy/http/request/form.py`` (BSD licence), over the page's lxml tree
(``Response.selector.root``, lxml.html's form elements): the form is chosen by name, id,
an XPath or CSS query (the first match, or its nearest ``<form>`` ancestor), else by number;
its values are those a browser would send (text, hidden, textarea, select, checked
checkboxes and radios; never submit, image or reset inputs), the fields ``formdata`` names
replaced, plus the clicked button (the first submit button, or the one ``clickdata``
describes by attributes or by ``nr``, its index among the form's inputs) unless
``dont_click``. The action is resolved against the page's ``<base href>`` if it has one.
A method other than GET or POST is sent as GET, as browsers do.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urljoin

from lxml.html import FormElement, HtmlElement, SelectElement
from w3lib.html import get_base_url, strip_html5_whitespace

if TYPE_CHECKING:
    from frontier_crawl.spider.api import Response

__all__ = ["form_request_args"]

VALID_FORM_METHODS = ("GET", "POST")
_RE = {"re": "http://exslt.org/regular-expressions"}
_INPUTS = (
    "descendant::textarea|descendant::select|descendant::input[not(@type) or @type["
    ' not(re:test(., "^(?:submit|image|reset)$", "i")) and (../@checked or'
    '  not(re:test(., "^(?:checkbox|radio)$", "i")))]]'
)
_CLICKABLES = (
    'descendant::input[re:test(@type, "^(submit|image)$", "i")]'
    '|descendant::button[not(@type) or re:test(@type, "^submit$", "i")]'
)

Pairs = list[tuple[str, Any]]


def form_request_args(
    response: Response, formname: str | None, formid: str | None, formnumber: int,
    formdata: Any, clickdata: dict[str, Any] | None, dont_click: bool,
    formxpath: str | None, formcss: str | None, url: str | None, method: str | None,
) -> tuple[str, str, Pairs]:  # fmt: skip
    """(url, method, form data pairs) of the request submitting a form of ``response``;
    ValueError (IndexError for ``formnumber``) naming what was not found."""
    if formcss is not None:
        from parsel.csstranslator import HTMLTranslator

        formxpath = HTMLTranslator().css_to_xpath(formcss)
    form = _get_form(response, formname, formid, formnumber, formxpath)
    pairs = _get_inputs(form, formdata, dont_click, clickdata)
    base = get_base_url(response.text, response.url)
    action = form.get("action")
    if url is not None:
        target = urljoin(base, url)
    elif action is None:
        target = base
    else:
        target = urljoin(base, strip_html5_whitespace(action))
    chosen = (method if method is not None else form.method or "GET").upper()
    return target, chosen if chosen in VALID_FORM_METHODS else "GET", pairs


def _get_form(
    response: Response, formname: str | None, formid: str | None, formnumber: int,
    formxpath: str | None,
) -> FormElement:  # fmt: skip
    root = response.selector.root
    forms = root.xpath("//form")
    if not forms:
        raise ValueError(f"No <form> element found in {response}")
    if formname is not None:
        found = root.xpath("//form[@name=$name]", name=formname)
        if found:
            return cast(FormElement, found[0])
    if formid is not None:
        found = root.xpath("//form[@id=$id]", id=formid)
        if found:
            return cast(FormElement, found[0])
    if formxpath is not None:
        nodes = root.xpath(formxpath)
        if nodes:
            el: HtmlElement | None = nodes[0]
            while el is not None:
                if el.tag == "form":
                    return cast(FormElement, el)
                el = el.getparent()
        raise ValueError(f"No <form> element found with {formxpath}")
    try:
        return cast(FormElement, forms[formnumber])
    except IndexError:
        raise IndexError(f"Form number {formnumber} not found in {response}") from None


def _get_inputs(
    form: FormElement, formdata: Any, dont_click: bool, clickdata: dict[str, Any] | None
) -> Pairs:
    try:
        formdata_keys = dict(formdata or ()).keys()
    except (ValueError, TypeError):
        raise ValueError("formdata should be a dict or iterable of tuples") from None
    if not formdata:
        formdata = []
    inputs = form.xpath(_INPUTS, namespaces=_RE)
    values: Pairs = [
        (k, "" if v is None else v)
        for k, v in (_value(e) for e in inputs)
        if k and k not in formdata_keys
    ]
    if not dont_click:
        clickable = _get_clickable(clickdata, form)
        if clickable and clickable[0] not in formdata and clickable[0] is not None:
            values.append(clickable)
    items: Iterable[tuple[str, Any]] = (
        formdata.items() if isinstance(formdata, dict) else formdata
    )
    values.extend((k, v) for k, v in items if v is not None)
    return [(k, list(v) if not isinstance(v, str | bytes) and _listlike(v) else v)
            for k, v in values]  # fmt: skip


def _listlike(value: Any) -> bool:
    return hasattr(value, "__iter__")


def _value(ele: Any) -> tuple[str | None, Any]:
    name, value = ele.name, ele.value
    if ele.tag == "select":
        select = cast(SelectElement, ele)
        if value is None and not select.multiple:
            options = select.value_options  # a browser sends the first option
            return (name, options[0]) if options else (None, None)
    return name, value


def _get_clickable(clickdata: dict[str, Any] | None, form: FormElement) -> tuple[str, str] | None:
    clickables = list(form.xpath(_CLICKABLES, namespaces=_RE))
    if not clickables:
        return None
    if clickdata is None:
        el = clickables[0]
        return (el.get("name"), el.get("value") or "")
    nr = clickdata.get("nr")
    if nr is not None:
        try:
            el = list(form.inputs)[nr]
        except IndexError:
            pass
        else:
            return (el.get("name"), el.get("value") or "")
    xpath = ".//*" + "".join(f'[@{k}="{v}"]' for k, v in clickdata.items())
    found = form.xpath(xpath)
    if len(found) == 1:
        return (found[0].get("name"), found[0].get("value") or "")
    if len(found) > 1:
        raise ValueError(
            f"Multiple elements found ({found!r}) matching the criteria in clickdata: "
            f"{clickdata!r}"
        )
    raise ValueError(f"No clickable element matching clickdata: {clickdata!r}")
